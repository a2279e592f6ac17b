// link_delay: joins two network interfaces and passes every frame between them after a fixed
// delay, in both directions: one-way latency for a link of the simulated cluster on a kernel
// without netem (bench/cluster.sh). Written by hand: Debian packages no user-space link
// emulator, and tc's only qdisc that delays (netem) is a kernel module some kernels lack.
//
//   link_delay IFACE_A IFACE_B DELAY_US
//
// Frames are read and written with packet sockets carrying virtio-net headers, so that the
// 64 KiB segments veth passes (TSO/GSO) cross whole, checksum offload included, as they would
// through a bridge. Each direction is a FIFO: a frame leaves DELAY_US after it arrived, in
// arrival order. It runs until an interface goes away or on SIGTERM/SIGINT, and prints on exit
// how many frames it passed and dropped, and how long after their time frames left (the
// scheduler's wake-up latency: on a busy machine the delay is longer than asked).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kMaxFrame = sizeof(struct virtio_net_hdr) + 65536 + 64 };

struct frame {
  struct frame* next;
  int64_t due_ns;
  size_t len;
  unsigned char bytes[];
};

struct side {
  const char* name;
  int fd;
  struct frame* head;  // frames read here, waiting to be written to the other side
  struct frame* tail;
  long passed;
  long dropped;  // frames the other side would not take (larger than it accepts)
  int stalled;   // the other side's send buffer is full: wait until it can take more
};

static volatile sig_atomic_t stop = 0;
static void on_signal(int s) { (void)s; stop = 1; }

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int open_side(const char* name) {
  unsigned index = if_nametoindex(name);
  if (index == 0) {
    fprintf(stderr, "link_delay: no interface %s\n", name);
    exit(2);
  }
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (fd < 0) {
    perror("link_delay: packet socket (needs root)");
    exit(2);
  }
  int one = 1, big = 8 << 20;
  // A virtio-net header before each frame: GSO segments and checksum offload pass through.
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0 ||
      setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
    perror("link_delay: setsockopt");
    exit(2);
  }
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
  struct sockaddr_ll at = {0};
  at.sll_family = AF_PACKET;
  at.sll_protocol = htons(ETH_P_ALL);
  at.sll_ifindex = (int)index;
  if (bind(fd, (struct sockaddr*)&at, sizeof at) != 0) {
    perror("link_delay: bind");
    exit(2);
  }
  // Frames for the hosts' addresses, not this interface's: every frame.
  struct packet_mreq promisc = {0};
  promisc.mr_ifindex = (int)index;
  promisc.mr_type = PACKET_MR_PROMISC;
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promisc, sizeof promisc) != 0) {
    perror("link_delay: promiscuous mode");
    exit(2);
  }
  return fd;
}

// Reads every frame waiting on `from` into its queue. Returns 0, or -1 when the interface
// is gone.
static int take(struct side* from, int64_t delay_ns) {
  static unsigned char buffer[kMaxFrame];
  for (;;) {
    ssize_t n = recv(from->fd, buffer, sizeof buffer, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return 0;
      fprintf(stderr, "link_delay: reading %s: %s\n", from->name, strerror(errno));
      return -1;
    }
    struct frame* f = malloc(sizeof *f + (size_t)n);
    if (f == NULL) {
      fprintf(stderr, "link_delay: out of memory\n");
      exit(1);
    }
    f->next = NULL;
    f->due_ns = now_ns() + delay_ns;
    f->len = (size_t)n;
    memcpy(f->bytes, buffer, (size_t)n);
    if (from->tail) from->tail->next = f; else from->head = f;
    from->tail = f;
  }
}

// Writes the frames of `from` that are due to `to`. Returns 0, or -1 when `to` is gone.
static int64_t late_sum_ns = 0, late_count = 0;

static int release(struct side* from, const struct side* to, int64_t* latest_late_ns) {
  int64_t now = now_ns();
  while (from->head && from->head->due_ns <= now) {
    struct frame* f = from->head;
    if (send(to->fd, f->bytes, f->len, 0) < 0) {
      if (errno == EAGAIN || errno == ENOBUFS) {
        from->stalled = 1;  // the next wait is for room on `to`, not a busy retry
        return 0;
      }
      if (errno != EMSGSIZE && errno != EINVAL) {
        fprintf(stderr, "link_delay: writing %s: %s\n", to->name, strerror(errno));
        return -1;
      }
      from->dropped++;
    } else {
      from->passed++;
    }
    if (now - f->due_ns > *latest_late_ns) *latest_late_ns = now - f->due_ns;
    late_sum_ns += now - f->due_ns;
    late_count++;
    from->head = f->next;
    if (from->head == NULL) from->tail = NULL;
    free(f);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: link_delay IFACE_A IFACE_B DELAY_US\n");
    return 2;
  }
  char* end = NULL;
  long delay_us = strtol(argv[3], &end, 10);
  if (*argv[3] == '\0' || *end != '\0' || delay_us < 0 || delay_us > 10000000) {
    fprintf(stderr, "link_delay: DELAY_US must be 0-10000000 microseconds, not '%s'\n", argv[3]);
    return 2;
  }
  const int64_t delay_ns = (int64_t)delay_us * 1000;
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake-ups to the microsecond where the scheduler allows
  // A wire takes no turn on the hosts' cores: real-time priority, so that the relay wakes up on
  // time however busy the (shared) cores are. Without it (no privilege) the delay grows with
  // the load, which the exit line shows.
  struct sched_param priority = {.sched_priority = 10};
  if (sched_setscheduler(0, SCHED_FIFO, &priority) != 0)
    perror("link_delay: real-time priority refused, the delay will grow with the load");
  // The signals are taken only inside ppoll, so that one arriving between two waits is not lost.
  sigset_t blocked, during_wait;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  sigprocmask(SIG_BLOCK, &blocked, &during_wait);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  struct side sides[2] = {{argv[1], open_side(argv[1]), NULL, NULL, 0, 0, 0},
                          {argv[2], open_side(argv[2]), NULL, NULL, 0, 0, 0}};
  int64_t latest_late_ns = 0;
  int status = 0;
  while (!stop) {
    int64_t wait_ns = -1;
    for (int i = 0; i < 2; ++i) {
      if (sides[i].head == NULL || sides[i].stalled) continue;
      int64_t left = sides[i].head->due_ns - now_ns();
      if (left < 0) left = 0;
      if (wait_ns < 0 || left < wait_ns) wait_ns = left;
    }
    // A side's fd also waits for room when the frames bound for it are stalled.
    struct pollfd fds[2] = {{sides[0].fd, POLLIN | (sides[1].stalled ? POLLOUT : 0), 0},
                            {sides[1].fd, POLLIN | (sides[0].stalled ? POLLOUT : 0), 0}};
    struct timespec t = {wait_ns / 1000000000, wait_ns % 1000000000};
    if (ppoll(fds, 2, wait_ns < 0 ? NULL : &t, &during_wait) < 0 && errno != EINTR) {
      perror("link_delay: ppoll");
      status = 1;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
        stop = 1;  // the interface went away: the cluster is being taken down
        break;
      }
    }
    if (stop) break;
    sides[0].stalled = sides[1].stalled = 0;
    if (take(&sides[0], delay_ns) != 0 || take(&sides[1], delay_ns) != 0 ||
        release(&sides[0], &sides[1], &latest_late_ns) != 0 ||
        release(&sides[1], &sides[0], &latest_late_ns) != 0)
      break;
  }
  fprintf(stderr,
          "link_delay: %s to %s %ld frames (%ld dropped), %s to %s %ld (%ld dropped); frames left "
          "%.1f us after their time on average, %.1f us at most\n",
          sides[0].name, sides[1].name, sides[0].passed, sides[0].dropped, sides[1].name,
          sides[0].name, sides[1].passed, sides[1].dropped,
          late_count ? (double)late_sum_ns / (double)late_count / 1000.0 : 0.0,
          (double)latest_late_ns / 1000.0);
  return status;
}
