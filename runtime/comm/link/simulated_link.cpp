// SimulatedLinkCommunicator: alpha-beta completion delays around real collectives (see
// simulated_link.h and Note [Link occupancy]).
#include "runtime/comm/link/simulated_link.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/tracer.h"

#if defined(ZEROLAP_WITH_CUDA)
#include <cuda_runtime.h>

#include "base/cuda_check.h"
#include "runtime/comm/link/link_delay_kernels.h"
#endif

namespace zl {
namespace {

// A bound on any modelled wait, whatever runtime.timeout_s says: about 32 years, far inside the
// steady clock's range (~292 years of nanoseconds), so a reservation never overflows it.
constexpr double kMaxModelledWaitS = 1e9;

double tier_bandwidth_gbps(const LinkConfig& link, LinkTier tier) {
  return tier == LinkTier::Intra ? link.intra_gbps : link.bandwidth_gbps;
}

}  // namespace

std::string describe_tier(const LinkConfig& link, LinkTier tier) {
  return fmt::format("link.latency_us = {}, link.{} = {}", link.latency_us,
                     tier == LinkTier::Intra ? "intra_gbps" : "bandwidth_gbps",
                     tier_bandwidth_gbps(link, tier));
}

double modelled_seconds(const LinkConfig& link, CollectiveOp op, std::int64_t payload,
                        LinkSpan span) {
  const int p = span.ranks;
  if (p <= 1 || op == CollectiveOp::HostTask) return 0.0;
  const double bytes_per_s = tier_bandwidth_gbps(link, span.tier) * 1e9 / 8.0;
  const double wire = static_cast<double>(wire_bytes(op, payload, p));
  const double hops = op == CollectiveOp::AllReduce ? 2.0 * (p - 1) : 1.0 * (p - 1);
  return (bytes_per_s > 0.0 ? wire / bytes_per_s : 0.0) + hops * link.latency_us * 1e-6;
}

double modelled_seconds(const LinkConfig& link, CollectiveOp op, std::int64_t payload, int world) {
  return modelled_seconds(link, op, payload, flat_link_span(link, world));
}

LinkSpan link_span(const LinkConfig& link, int world, int members, int stride) {
  ZL_CHECK(members >= 1 && stride >= 1 && world % (members * stride) == 0,
           "link_span: {} members {} apart do not tile a world of {}", members, stride, world);
  const int modelled = modelled_ranks(link, world);
  LinkSpan span;
  if (stride == 1 && members == world) {
    span.ranks = modelled;  // the flat communicator
  } else if (stride > 1 && members * stride == world) {
    ZL_CHECK(modelled % stride == 0, "link_span: groups of {} do not tile {} modelled ranks",
             stride, modelled);
    span.ranks = modelled / stride;  // one rank of each group
  } else {
    span.ranks = members;  // a group keeps its members
  }
  // The block of consecutive ranks each such communicator spreads over; blocks start at
  // multiples of it, so all of them lie inside nodes iff the node is a multiple of it.
  const std::int64_t block = std::int64_t{span.ranks} * stride;
  span.tier =
      link.node_ranks > 0 && link.node_ranks % block == 0 ? LinkTier::Intra : LinkTier::Inter;
  return span;
}

void check_link_world(const LinkConfig& link, int world, const std::string& source) {
  if (link.node_ranks <= 0) return;
  const int modelled = modelled_ranks(link, world);
  if (modelled % link.node_ranks == 0) return;
  throw UserError(fmt::format(
      "{}: link.node_ranks = {} does not divide the {} ranks the link models ({}): each modelled "
      "node holds node_ranks consecutive ranks; choose a divisor of {}",
      source, link.node_ranks, modelled,
      link.ranks > 0 ? "link.ranks" : "the world size", modelled));
}

std::string link_label(const LinkConfig& link) {
  if (!link.enabled()) return {};
  const std::string bandwidth =
      link.node_ranks > 0
          ? fmt::format("{:g} Gb/s between nodes of {} ranks, {:g} Gb/s inside",
                        link.bandwidth_gbps, link.node_ranks, link.intra_gbps)
      : link.bandwidth_gbps > 0 ? fmt::format("{:g} Gb/s", link.bandwidth_gbps)
                                : std::string("unlimited bandwidth");  // latency alone
  return fmt::format("simulated link: {}, {:g} us{}", bandwidth, link.latency_us,
                     link.ranks > 0 ? fmt::format(", timed as {} ranks", link.ranks) : "");
}

const std::shared_ptr<SimulatedLink>& RankLinks::of(LinkTier tier) const {
  const std::shared_ptr<SimulatedLink>& link = tier == LinkTier::Intra ? intra : inter;
  ZL_CHECK(link || !inter, "no {} link: a span inside a node needs link.node_ranks",
           to_string(tier));
  return link;
}

RankLinks make_rank_links(const LinkConfig& link, double timeout_s) {
  RankLinks out;
  if (!link.enabled()) return out;
  out.inter = std::make_shared<SimulatedLink>(link, timeout_s, LinkTier::Inter);
  if (link.node_ranks > 0) {
    out.intra = std::make_shared<SimulatedLink>(link, timeout_s, LinkTier::Intra);
  }
  return out;
}

SimulatedLink::Clock::time_point SimulatedLink::reserve(Clock::time_point issued, double seconds) {
  std::lock_guard lock(mutex_);
  const Clock::time_point begin = std::max(issued, busy_until_);
  busy_until_ = begin + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
  return busy_until_;
}

std::shared_ptr<DeviceLink> SimulatedLink::device() {
  std::lock_guard lock(mutex_);
  if (!device_) device_ = std::make_shared<DeviceLink>(config_);
  return device_;
}

#if defined(ZEROLAP_WITH_CUDA)
DeviceLink::DeviceLink(const LinkConfig& config) : config_(config) {
  const std::size_t bytes = (1 + kSlots) * sizeof(std::uint64_t);
  ZL_CUDA_CHECK(cudaMalloc(&device_words_, bytes));
  ZL_CUDA_CHECK(cudaMemset(device_words_, 0, bytes));
  ZL_CUDA_CHECK(cudaDeviceSynchronize());  // the zeros are in place before any stream uses them
}

DeviceLink::~DeviceLink() {
  // After the communicators' streams drained.
  if (device_words_ != nullptr) cudaFree(device_words_);
}

void DeviceLink::reserve(void* stream, int slot, double seconds) {
  const auto ns = static_cast<std::uint64_t>(std::llround(std::max(seconds, 0.0) * 1e9));
  launch_link_reserve(stream, device_words_, device_words_ + 1 + slot, ns);
}

void DeviceLink::wait(void* stream, int slot) {
  launch_link_wait(stream, device_words_ + 1 + slot);
}
#else
DeviceLink::DeviceLink(const LinkConfig& config) : config_(config) {
  throw InternalError("DeviceLink: the simulated link on a device stream needs a CUDA build");
}
DeviceLink::~DeviceLink() = default;
void DeviceLink::reserve(void*, int, double) {}
void DeviceLink::wait(void*, int) {}
#endif

int DeviceLink::claim_slot() {
  ZL_CHECK(next_slot_ < kSlots, "DeviceLink: more than {} communicators on one link", kSlots);
  return next_slot_++;
}

Work SimulatedLinkCommunicator::modelled(CollectiveOp op, std::int64_t payload_bytes,
                                         const char* label,
                                         const std::function<void()>& collective) {
  // Both host tasks run on the inner stream, in order around the real collective, so the shared
  // timing state needs no lock.
  struct Timing {
    SimulatedLink::Clock::time_point issued, end;
    double begin_us = 0.0;
    StreamTimeline::Mark begin_mark;  // the modelled transfer on the stream's timeline
  };
  auto timing = std::make_shared<Timing>();
  const double seconds = modelled_seconds(link_->config(), op, payload_bytes, span_);
  {
    std::lock_guard lock(stats_mutex_);
    wire_bytes_ += wire_bytes(op, payload_bytes, span_.ranks);
  }
  // The modelled wait has the deadline of a real one. Checked before anything is reserved, so a
  // reservation is never a duration beyond the clock's range either.
  auto check_deadline = [this, label, payload_bytes](double waited_s) {
    if (waited_s <= std::min(link_->timeout_s(), kMaxModelledWaitS)) return;
    throw RuntimeFailure(fmt::format(
        "rank {}: {} of {} bytes on communicator '{}' would end on the modelled link {:.3g} s "
        "after it was issued, beyond runtime.timeout_s = {} s ({})",
        rank(), label, payload_bytes, name(), waited_s, link_->timeout_s(),
        describe_tier(link_->config(), span_.tier)));
  };
  inner_->then([this, timing, seconds, check_deadline](const ExecContext&) {
    timing->issued = SimulatedLink::Clock::now();
    check_deadline(seconds);
    timing->end = link_->reserve(timing->issued, seconds);
    // Queued behind earlier transfers (Note [Link occupancy]), it may end later still.
    check_deadline(std::chrono::duration<double>(timing->end - timing->issued).count());
    if (tracer_) {
      timing->begin_us = tracer_->now_us();
      timing->begin_mark = tracer_->timeline().mark(ExecContext{});  // on the comm thread
    }
  });
  collective();
  return inner_->then([this, timing, seconds, op, payload_bytes, label](const ExecContext&) {
    std::this_thread::sleep_until(timing->end);
    const double busy =
        std::chrono::duration<double>(SimulatedLink::Clock::now() - timing->issued).count();
    {
      std::lock_guard lock(stats_mutex_);
      busy_seconds_ += busy;
    }
    if (tracer_) {
      // Encloses the inner communicator's span of the real collective (Note [Exposed
      // communication], runtime/trace/timeline_summary.h).
      tracer_->timeline().span(name(), label, -1, timing->begin_mark,
                               tracer_->timeline().mark(ExecContext{}));
    }
    if (tracer_ && tracer_->enabled()) {
      // Encloses the real collective's span on the same thread: the modelled transfer.
      tracer_->span(name(), fmt::format("link {}", label), timing->begin_us, tracer_->now_us(),
                    {{"op", label},
                     {"bytes", payload_bytes},
                     {"modelled_us", seconds * 1e6},
                     {"wire_bytes", wire_bytes(op, payload_bytes, span_.ranks)},
                     {"tier", to_string(span_.tier)}});
    }
  });
}

CommStats SimulatedLinkCommunicator::stats() const {
  CommStats s = inner_->stats();
  std::lock_guard lock(stats_mutex_);
  s.busy_seconds = busy_seconds_;
  s.wire_bytes = wire_bytes_;
  return s;
}

void SimulatedLinkCommunicator::reset_stats() {
  inner_->reset_stats();
  std::lock_guard lock(stats_mutex_);
  busy_seconds_ = 0.0;
  wire_bytes_ = 0;
}

void SimulatedLinkCommunicator::set_tracer(Tracer* tracer) {
  tracer_ = tracer;
  inner_->set_tracer(tracer);
}

std::unique_ptr<Communicator> with_simulated_link(std::unique_ptr<Communicator> comm,
                                                  const std::shared_ptr<SimulatedLink>& link,
                                                  LinkSpan span) {
  if (!link || !link->config().enabled()) return comm;
  ZL_CHECK(span.ranks <= 1 || span.tier == link->tier(), "communicator {} timed {} on the {} link",
           comm->name(), to_string(span.tier), to_string(link->tier()));
  if (comm->exec().device == DeviceKind::Cuda) {
    ZL_CHECK(comm->model_link_on_stream(link->device(), span),
             "communicator {} runs on a device stream but cannot model the link there",
             comm->name());
    return comm;
  }
  return std::make_unique<SimulatedLinkCommunicator>(std::move(comm), link, span);
}

std::unique_ptr<Communicator> with_simulated_link(std::unique_ptr<Communicator> comm,
                                                  const RankLinks& links, LinkSpan span) {
  return with_simulated_link(std::move(comm), links.of(span.tier), span);
}

}  // namespace zl
