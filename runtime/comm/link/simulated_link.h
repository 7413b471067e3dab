// A modelled network for benchmarking on one machine: SimulatedLinkCommunicator decorates another
// communicator so that each collective completes no earlier than the alpha-beta time of a ring /
// chain on a link of `[link] bandwidth_gbps` and `latency_us` (with link.node_ranks, of the tier
// its members span: Note [Link model]). The real collective still runs, so results stay bitwise
// identical; only completion is delayed. Every figure taken with it must be labelled with
// link_label() (docs/design.md, "Modelled network").
// It needs then() tasks that run in stream order on a host thread (the CPU backend); where a
// backend's then() runs at once on the caller (CUDA), the delay is instead two kernels on the comm
// stream (Note [Link on the device]), or it would block the issuing thread.
//
// Note [Link on the device]: on CUDA, NcclCommunicator brackets each collective on its comm stream
// with a 1-thread kernel that reserves the rank's link of its tier when the stream reaches it
// (after the wait for the data's producer, so at the moment the real collective could start; FIFO
// with the other streams of that tier through one 64-bit word of device memory) and a 1-thread
// kernel after the collective that spins, sleeping, until the GPU's global timer passes the
// reservation's end. So a collective completes on the stream at max(real end, start + modelled
// time), exactly as on the CPU, and everything ordered after it by events (an interleaved step on
// the comm stream, the next layer's wait for its broadcast on the compute stream) waits for the
// modelled link: the real overlap machinery runs against it. The host never blocks; results are
// unchanged; the spinning thread holds one SM slot, which compute kernels can share.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/comm/comm_options.h"

namespace zl {

// The ranks the link model times a job of `world` ranks as: link.ranks, or `world` when 0.
inline int modelled_ranks(const LinkConfig& link, int world) {
  return link.ranks > 0 ? link.ranks : world;
}

// Note [Link model]: seconds a collective of `payload` bytes S (the whole buffer, all shards)
// takes on a communicator of span {p, tier}, with the bandwidth-optimal ring/chain algorithms
// that wire_bytes() counts (communicator.h); alpha = link.latency_us on both tiers, and B the
// tier's bandwidth: link.intra_gbps inside a node, link.bandwidth_gbps between nodes (and with
// one tier, link.node_ranks = 0):
//   all-reduce (reduce-scatter + all-gather ring)              2(p-1)/p * S/B + 2(p-1) * alpha
//   reduce (reduce-scatter + gather to the root), broadcast
//   (scatter + all-gather), reduce-scatter, all-gather          (p-1)/p * S/B + (p-1) * alpha
// and zero for p = 1. A ring whose members sit in more than one node is a flat ring whose every
// step waits for its hops across nodes: all p ranks at the inter bandwidth (no hierarchical or
// tree algorithms, no contention). link_span() gives p and the tier of a communicator.
double modelled_seconds(const LinkConfig& link, CollectiveOp op, std::int64_t payload,
                        LinkSpan span);
// The same for a flat communicator of all `world` ranks: flat_link_span(link, world).
double modelled_seconds(const LinkConfig& link, CollectiveOp op, std::int64_t payload, int world);

// The span of a communicator whose `members` world ranks are spaced `stride` apart, starting at a
// multiple of members x stride (every such communicator of the job has the same span): stride 1
// and members = world, the flat communicator; stride 1 and fewer members, a group of consecutive
// ranks (a shard group); stride G and world / G members, one rank of each group of G (the
// cross-replica communicator). Ranks: with M = modelled_ranks(link, world) (link.ranks = M times
// the job as M ranks), a flat communicator is timed as M ranks, a cross-replica one as M / G, a
// group as its members. Tier: Intra iff link.node_ranks = N > 0 and each such communicator lies
// in one node of N consecutive (modelled) ranks, that is N is a multiple of ranks x stride (the
// block of ranks its members are spread over); otherwise Inter. A one-rank span is never timed.
// A group of the whole world (members = world, stride 1) is the flat communicator.
// Preconditions (InternalError): members x stride divides world, and G divides M.
LinkSpan link_span(const LinkConfig& link, int world, int members, int stride);
// The span of a communicator of every rank.
inline LinkSpan flat_link_span(const LinkConfig& link, int world) {
  return link_span(link, world, world, 1);
}

// The world-dependent check of [link], for the commands that know the world size at start-up:
// link.node_ranks must divide the modelled ranks (modelled_ranks), or nodes would hold part of a
// group. UserError naming the key, `source` (where link.node_ranks was set: where_set) and both
// numbers.
void check_link_world(const LinkConfig& link, int world, const std::string& source);

// The keys that set a tier's link, for messages: "link.latency_us = 5, link.intra_gbps = 3600".
std::string describe_tier(const LinkConfig& link, LinkTier tier);
inline const char* to_string(LinkTier tier) { return tier == LinkTier::Intra ? "intra" : "inter"; }

// "simulated link: 10 Gb/s, 5 us"; with two tiers "simulated link: 400 Gb/s between nodes of 8
// ranks, 3600 Gb/s inside, 5 us"; ", timed as 64 ranks" with link.ranks. Empty when the link is
// off.
std::string link_label(const LinkConfig& link);

// One link of one rank, shared by all of that rank's communicators of its tier: the reduce and the
// broadcast streams queue for the same wire instead of each getting a full link.
// Note [Link occupancy]: a transfer is modelled as starting when its stream issues it, or when the
// link is free again if an earlier transfer still occupies it (FIFO, no fair sharing), and
// holding the link for modelled_seconds(). A rank that waits for a late peer inside the real
// collective therefore overlaps that wait with its modelled transfer: the model never charges
// more than real time + transfer time, and charges exactly the transfer time when peers arrive
// together (bucket collectives are issued at the same point of backward on every rank).
// With two tiers a rank has two links (RankLinks): its node's links (NVLink) and its network port
// are separate wires, so a communicator occupies the rank's link of its span's tier only, and an
// intra-node collective never queues behind an inter-node one. (The hops inside a node of an
// inter-node ring are not charged to the intra link: they are never that ring's bottleneck.)
class DeviceLink;

class SimulatedLink {
 public:
  using Clock = std::chrono::steady_clock;
  // timeout_s bounds the modelled wait as runtime.timeout_s bounds a real one: a transfer that
  // would end later than that after its issue is a RuntimeFailure, not a long sleep.
  explicit SimulatedLink(const LinkConfig& config, double timeout_s = CommOptions{}.timeout_s,
                         LinkTier tier = LinkTier::Inter)
      : config_(config), timeout_s_(timeout_s), tier_(tier) {}

  const LinkConfig& config() const { return config_; }
  LinkTier tier() const { return tier_; }  // the wire it models: spans of this tier only
  double timeout_s() const { return timeout_s_; }
  // Reserves the link for `seconds` from `issued` on (or from when it is free); returns the time
  // the transfer ends.
  Clock::time_point reserve(Clock::time_point issued, double seconds);
  // The same link on the current CUDA device, for communicators on device streams.
  std::shared_ptr<DeviceLink> device();

 private:
  LinkConfig config_;
  double timeout_s_;
  LinkTier tier_;
  std::shared_ptr<DeviceLink> device_;
  std::mutex mutex_;
  Clock::time_point busy_until_{};
};

// A rank's links, one per tier (Note [Link occupancy]): `intra` only with link.node_ranks. Both
// null when the link is off. Give each communicator links.of(its span's tier).
struct RankLinks {
  std::shared_ptr<SimulatedLink> inter, intra;
  const std::shared_ptr<SimulatedLink>& of(LinkTier tier) const;
};
RankLinks make_rank_links(const LinkConfig& link, double timeout_s = CommOptions{}.timeout_s);

// The link model's device side (Note [Link on the device]): one per rank and tier, created on
// first use by SimulatedLink::device() on the calling thread's CUDA device, shared by the rank's
// communicators of that tier. Slots hold each communicator's reservation end (a stream runs one
// collective at a time). CUDA builds only; elsewhere constructing it is an InternalError.
class DeviceLink {
 public:
  static constexpr int kSlots = 16;
  explicit DeviceLink(const LinkConfig& config);
  ~DeviceLink();
  DeviceLink(const DeviceLink&) = delete;
  DeviceLink& operator=(const DeviceLink&) = delete;

  const LinkConfig& config() const { return config_; }
  int claim_slot();  // one per communicator, in construction order
  // Enqueue on `stream` (a cudaStream_t): reserve the link for `seconds` into `slot`; hold the
  // stream until that reservation ends.
  void reserve(void* stream, int slot, double seconds);
  void wait(void* stream, int slot);

 private:
  LinkConfig config_;
  std::uint64_t* device_words_ = nullptr;  // [0]: the link busy until (ns); [1 + slot]: slot ends
  int next_slot_ = 0;
};

class SimulatedLinkCommunicator final : public Communicator {
 public:
  // `span`: the inner communicator's place on the modelled machine (link_span); its tier is the
  // link's (with_simulated_link, which makes every one of these, checks it).
  SimulatedLinkCommunicator(std::unique_ptr<Communicator> inner,
                            std::shared_ptr<SimulatedLink> link, LinkSpan span)
      : link_(std::move(link)), span_(span), inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

  using Communicator::all_reduce;
  using Communicator::broadcast;
  using Communicator::reduce;
  Work all_reduce(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                  const ExecContext* issuing_stream = nullptr) override {
    return modelled(CollectiveOp::AllReduce, n * dtype_size(dtype), "all_reduce",
                    [&] { inner_->all_reduce(buf, n, dtype, op, issuing_stream); });
  }
  Work reduce(void* buf, std::int64_t n, DType dtype, int root, ReduceOp op,
              const ExecContext* issuing_stream = nullptr) override {
    return modelled(CollectiveOp::Reduce, n * dtype_size(dtype), "reduce",
                    [&] { inner_->reduce(buf, n, dtype, root, op, issuing_stream); });
  }
  Work broadcast(void* buf, std::int64_t n, DType dtype, int root,
                 const ExecContext* issuing_stream = nullptr) override {
    return modelled(CollectiveOp::Broadcast, n * dtype_size(dtype), "broadcast",
                    [&] { inner_->broadcast(buf, n, dtype, root, issuing_stream); });
  }
  Work reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                      const ExecContext* issuing_stream = nullptr) override {
    return modelled(CollectiveOp::ReduceScatter, n * dtype_size(dtype), "reduce_scatter",
                    [&] { inner_->reduce_scatter(buf, n, dtype, op, issuing_stream); });
  }
  Work all_gather(void* buf, std::int64_t n, DType dtype,
                  const ExecContext* issuing_stream = nullptr) override {
    return modelled(CollectiveOp::AllGather, n * dtype_size(dtype), "all_gather",
                    [&] { inner_->all_gather(buf, n, dtype, issuing_stream); });
  }
  Work all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                       const ExecContext* issuing_stream = nullptr) override {
    return modelled(CollectiveOp::AllGather, n * dtype_size(dtype), "all_gather",
                    [&] { inner_->all_gather_from(shard, buf, n, dtype, issuing_stream); });
  }
  Work all_reduce_f64(double* buf, std::int64_t n) override {
    return modelled(CollectiveOp::AllReduce, n * 8, "all_reduce_f64",
                    [&] { inner_->all_reduce_f64(buf, n); });
  }
  Work then(std::function<void(const ExecContext& stream)> fn) override {
    return inner_->then(std::move(fn));
  }
  // Nothing crosses the link.
  Work no_op(const ExecContext* issuing_stream = nullptr) override {
    return inner_->no_op(issuing_stream);
  }
  void synchronize() override { inner_->synchronize(); }
  ExecContext exec() const override { return inner_->exec(); }

  // The inner communicator's counts, except busy_seconds (measured from issue to the modelled
  // end) and wire_bytes (for the span's ranks, which link.ranks may set).
  CommStats stats() const override;
  void reset_stats() override;
  void set_tracer(Tracer* tracer) override;

 private:
  // Brackets `collective` (which issues the real operation on the inner communicator) with a
  // host task that reserves the link and one that sleeps until the reservation ends.
  Work modelled(CollectiveOp op, std::int64_t payload_bytes, const char* label,
                const std::function<void()>& collective);

  std::shared_ptr<SimulatedLink> link_;
  LinkSpan span_;
  Tracer* tracer_ = nullptr;
  mutable std::mutex stats_mutex_;
  double busy_seconds_ = 0.0;
  std::int64_t wire_bytes_ = 0;
  // Last: destroyed first, so its stream drains while the link and the mutex above still exist.
  std::unique_ptr<Communicator> inner_;
};

// Wraps `comm`, whose span is `span` (link_span), when `link` is enabled (on a device stream the
// backend models it itself, Note [Link on the device]); returns it unchanged otherwise. `link` is
// the rank's link of span.tier.
std::unique_ptr<Communicator> with_simulated_link(std::unique_ptr<Communicator> comm,
                                                  const std::shared_ptr<SimulatedLink>& link,
                                                  LinkSpan span);
// The same with the rank's link of the span's tier: links.of(span.tier).
std::unique_ptr<Communicator> with_simulated_link(std::unique_ptr<Communicator> comm,
                                                  const RankLinks& links, LinkSpan span);

}  // namespace zl
