#include "mpi/mpi_transport.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "mpi/collectives.h"
#include "mpi/staging.h"
#include "mpi/wait_query.h"
#include "mpi/wire.h"
#include "tandem/common/check.h"

namespace tandem::mpi {

namespace {

// How long abort() lets the progress thread call MPI_Abort before calling it itself.
constexpr std::chrono::seconds kAbortGrace{5};
constexpr double kMinShutdownTimeout_s = 60.0;
// How long a timed-out rank waits for each answer when it asks peers what they wait for: half
// the communication timeout, within these bounds. A live rank answers within milliseconds.
constexpr double kMinAnswerWindow_s = 0.5;
constexpr double kMaxAnswerWindow_s = 3.0;

}  // namespace

MpiTransport::MpiTransport(const Environment& env, Layout layout, MpiTransportOptions options)
    : rank_(env.rank()),
      size_(env.size()),
      prefix_(env.prefix()),
      layout_(layout),
      options_(options),
      mailbox_([this] {
        if (engine_) engine_->wake();
      }) {
  layout_.validate(size_);
  // Every rank runs the same MPI library, so all ranks refuse together, before any collective.
  TANDEM_CHECK(options_.cuda_path != MpiTransportOptions::CudaPath::kDirect || env.cuda_aware(),
               "MpiTransportOptions::cuda_path = direct: this MPI cannot read or write CUDA memory "
               "(it is not "
               "CUDA-aware: {}); use MpiTransportOptions::cuda_path = staged or auto, which copy "
               "CUDA tensors through "
               "pinned host memory",
               env.library_version());
  cuda_direct_ = options_.cuda_path == MpiTransportOptions::CudaPath::kDirect ||
                 (options_.cuda_path == MpiTransportOptions::CudaPath::kAuto && env.cuda_aware());
  TANDEM_CHECK(options_.comm_timeout_s > 0, "the communication timeout must be positive, got {} s",
               options_.comm_timeout_s);
  tensor_comm_ = Communicator::dup(env.world());
  control_comm_ = Communicator::dup(env.world());
  data_parallel_comm_ = Communicator::split(env.world(), layout_.slab_group_of(rank_), rank_);
  ProgressEngine::Options engine_options;
  engine_options.comm = tensor_comm_.get();
  if (cuda_direct_ && options_.device.is_cuda()) {
    engine_options.receive_target.device = options_.device;
  } else {
    engine_options.receive_target.pinned = pinned_memory_available();
    engine_options.receive_target.pool = BufferPool::create();
  }
  // Ranks reach the end at different times (the last stage finishes last), and a rank that
  // waited out a short timeout arrives late: give shutdown at least a minute.
  engine_options.shutdown_timeout =
      std::chrono::duration<double>(std::max(options_.comm_timeout_s, kMinShutdownTimeout_s));
  engine_options.prefix = prefix_;
  engine_ = std::make_unique<ProgressEngine>(std::move(engine_options), mailbox_);
}

MpiTransport::~MpiTransport() = default;

void MpiTransport::check_local(int device, const char* what) const {
  TANDEM_CHECK(device == rank_,
               "{} the MPI transport on rank {} owns device {} only, not device {} (device = "
               "rank under MPI)",
               what, rank_, rank_, device);
}

void MpiTransport::send(int from_device, int to_device, const transport::MessageKey& key,
                        const torch::Tensor& tensor, transport::ReadyEvent ready) {
  check_local(from_device, "send:");
  TANDEM_CHECK(to_device >= 0 && to_device < size_,
               "send of {}: device {} does not exist; the job has ranks 0..{}", key.to_string(),
               to_device, size_ - 1);
  TANDEM_CHECK(tensor.defined() && tensor.layout() == c10::kStrided,
               "send of {}: only defined dense tensors can be sent", key.to_string());
  if (mailbox_.aborted()) throw transport::Aborted("send of " + key.to_string() + " after abort");

  torch::Tensor payload =
      cuda_direct_ ? device_payload(tensor, ready) : host_payload(tensor, ready);
  if (to_device == rank_) {
    // To itself: no MPI, but still a tensor of its own, like every other receive.
    if (payload.is_alias_of(tensor)) payload = payload.clone();
    mailbox_.deliver(rank_, key, std::move(payload));
    return;
  }
  WireHeader header{key, payload.scalar_type(), payload.sizes().vec(),
                    payload.numel() * static_cast<int64_t>(payload.element_size())};
  engine_->submit(
      make_send(tensor_comm_.get(), to_device, encode_header(header), std::move(payload)));
}

torch::Tensor MpiTransport::recv(int to_device, int from_device, const transport::MessageKey& key,
                                 c10::Device into) {
  check_local(to_device, "recv:");
  TANDEM_CHECK(from_device >= 0 && from_device < size_,
               "recv of {}: device {} does not exist; the job has ranks 0..{}", key.to_string(),
               from_device, size_ - 1);
  auto timeout = std::chrono::duration<double>(options_.comm_timeout_s);
  auto deadline =
      Mailbox::Clock::now() + std::chrono::duration_cast<Mailbox::Clock::duration>(timeout);
  torch::Tensor payload = mailbox_.take(from_device, key, deadline);
  if (!payload.defined()) {
    std::vector<transport::MessageKey> late = mailbox_.stashed(from_device);
    if (std::find(late.begin(), late.end(), key) != late.end()) {
      throw transport::CommTimeout(fmt::format(
          "{} rank {} waited {:g} s for message {} from rank {}, which arrived only after the "
          "deadline: this rank was stopped or starved of CPU (a longer "
          "MpiTransportOptions::comm_timeout_s helps "
          "on a crowded machine)",
          prefix_, rank_, options_.comm_timeout_s, key.to_string(), from_device));
    }
    throw transport::CommTimeout(fmt::format(
        "{} rank {} waited {:g} s for message {} from rank {} and it did not arrive; {}{}", prefix_,
        rank_, options_.comm_timeout_s, key.to_string(), from_device, stashed_note(from_device),
        wait_chain(from_device)));
  }
  // What came through MPI was allocated by the progress thread, which charges no device; a
  // message to itself is a copy this thread made, charged already.
  torch::Tensor out = received_on(std::move(payload), into);
  return from_device == rank_ ? out : charged_to_caller(std::move(out));
}

std::string MpiTransport::stashed_note(int peer) const {
  std::vector<transport::MessageKey> keys = mailbox_.stashed(peer);
  if (keys.empty()) return fmt::format("no other message from rank {} is waiting either", peer);
  constexpr size_t kShown = 8;
  std::vector<std::string> shown;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) shown.push_back(keys[i].to_string());
  return fmt::format("{} message{} from rank {} arrived and wait{} unreceived: {}{}", keys.size(),
                     keys.size() == 1 ? "" : "s", peer, keys.size() == 1 ? "s" : "",
                     fmt::join(shown, ", "), keys.size() > kShown ? ", ..." : "");
}

double MpiTransport::answer_window_s() const {
  return std::clamp(options_.comm_timeout_s / 2, kMinAnswerWindow_s, kMaxAnswerWindow_s);
}

std::optional<WaitAnswer> MpiTransport::ask_what_waits(int peer) {
  auto question = std::make_shared<WaitQuestion>();
  question->id = next_question_++;
  engine_->submit(make_wait_question(tensor_comm_.get(), peer, question));
  auto deadline =
      Completion::Clock::now() + std::chrono::duration_cast<Completion::Clock::duration>(
                                     std::chrono::duration<double>(answer_window_s()));
  if (question->done->wait(deadline, [this] { return mailbox_.aborted(); }) !=
      Completion::Outcome::kDone) {
    question->abandoned.store(true);
    return std::nullopt;
  }
  return question->answer;
}

std::string MpiTransport::describe_wait(int peer, const std::optional<WaitAnswer>& answer) const {
  if (!answer) {
    return fmt::format(
        "rank {} does not answer what it waits for within {:g} s: it is stopped, hung, dead, or "
        "stuck in a collective",
        peer, answer_window_s());
  }
  if (answer->waits_for < 0) {
    return fmt::format("rank {} waits for no message (it computes, or waits in a collective)",
                       peer);
  }
  if (answer->arrived_since) {
    return fmt::format(
        "rank {} gave up waiting for message {} from rank {}, which arrived after its deadline "
        "(rank {} was stopped or starved of CPU)",
        peer, answer->key, answer->waits_for, peer);
  }
  return fmt::format("rank {} has itself waited {:.1f} s for message {} from rank {}{}", peer,
                     answer->seconds, answer->key, answer->waits_for,
                     answer->gave_up ? " (it gave up and reports too)" : "");
}

std::string MpiTransport::wait_chain(int peer) {
  if (peer == rank_) return "";
  std::vector<int> chain{rank_};  // chain[i] waits for chain[i + 1]
  std::string text;
  while (static_cast<int>(chain.size()) <= size_) {
    chain.push_back(peer);
    std::optional<WaitAnswer> answer = ask_what_waits(peer);
    if (mailbox_.aborted()) break;
    text += "; " + describe_wait(peer, answer);
    if (!answer || answer->waits_for < 0 || answer->arrived_since) break;
    peer = answer->waits_for;
    auto again = std::find(chain.begin(), chain.end(), peer);
    if (again != chain.end()) {
      std::vector<int> cycle(again, chain.end());
      cycle.push_back(peer);
      text +=
          fmt::format(": a deadlock, ranks {} each wait for the next", fmt::join(cycle, " -> "));
      break;
    }
  }
  return text;
}

std::string MpiTransport::group_note() {
  std::vector<std::string> notes;
  for (int peer : data_parallel_group()) {
    if (peer == rank_) continue;
    std::optional<WaitAnswer> answer = ask_what_waits(peer);
    if (mailbox_.aborted()) break;
    notes.push_back(describe_wait(peer, answer));
  }
  return notes.empty() ? "" : "; " + fmt::format("{}", fmt::join(notes, "; "));
}

void MpiTransport::abort(const std::string& reason, int exit_status) {
  if (mailbox_.abort(reason)) {
    std::fprintf(stderr, "%s %s\n", prefix_.c_str(), reason.c_str());
    std::fflush(stderr);
  }
  engine_->request_abort(exit_status);
  // The progress thread ends the job at its next iteration. Should it be stuck in a blocking
  // helper (a collective some rank never joined), end it from here: that breaks the one-thread
  // rule of MPI_THREAD_SERIALIZED, but it is the last MPI call this process makes.
  std::this_thread::sleep_for(kAbortGrace);
  MPI_Abort(MPI_COMM_WORLD, exit_status);
  std::_Exit(exit_status);  // not reached: MPI_Abort does not return
}

void MpiTransport::agree_on(uint64_t config_hash, const std::string& description) {
  engine_->call([&] { mpi::agree_on(control_comm_.get(), config_hash, description); });
}

double MpiTransport::clock_offset_us() {
  double offset = 0.0;
  engine_->call([&] { offset = mpi::clock_offset_us(control_comm_.get()); });
  return offset;
}

std::vector<std::string> MpiTransport::gather_strings(const std::string& text) {
  std::vector<std::string> all;
  engine_->call([&] { all = mpi::gather_strings(control_comm_.get(), text); });
  return all;
}

std::vector<std::string> MpiTransport::all_gather_strings(const std::string& text) {
  std::vector<std::string> all;
  engine_->call([&] { all = mpi::all_gather_strings(control_comm_.get(), text); });
  return all;
}

double MpiTransport::raw_pingpong_gbps(size_t bytes, int iters, int peer) {
  double gbps = 0.0;
  engine_->call([&] { gbps = mpi::raw_pingpong_gbps(control_comm_.get(), bytes, iters, peer); });
  return gbps;
}

void MpiTransport::barrier() {
  engine_->call([&] { barrier_idle(control_comm_.get()); });
}

}  // namespace tandem::mpi
