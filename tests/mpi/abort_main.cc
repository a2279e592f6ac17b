// A job that one rank aborts: rank 1 calls MpiTransport::abort while every other rank waits in
// recv for a message that never comes (with a timeout far beyond the test's). The check in
// mpi_abort.cmake expects a non-zero exit well within that timeout, the reason on stderr with
// rank 1's prefix, and never "not reached".
#include <chrono>
#include <cstdio>
#include <thread>

#include "mpi/environment.h"
#include "mpi/mpi_transport.h"

int main(int argc, char** argv) {
  using namespace tandem;
  mpi::Environment env(&argc, &argv);
  mpi::MpiTransport transport(env, mpi::Layout{env.size(), 1}, mpi::MpiTransportOptions{600.0});
  if (env.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    transport.abort("deliberate abort from the abort test");
  } else {
    transport.recv(env.rank(), 1, transport::MessageKey{"never", 0, 0, false, 1, 0}, c10::kCPU);
  }
  std::fprintf(stderr, "%s not reached\n", env.prefix().c_str());
  return 0;
}
