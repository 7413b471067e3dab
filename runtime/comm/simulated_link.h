// A modelled network for benchmarking on one machine: SimulatedLinkCommunicator decorates another
// communicator so that each collective completes no earlier than the alpha-beta time of a ring /
// chain on a link of `[link] bandwidth_gbps` and `latency_us`. The real collective still runs, so
// results stay bitwise identical; only completion is delayed. Every figure taken with it must be
// labelled with link_label() (docs/design.md, "Modelled network").
// It needs then() tasks that run in stream order on a host thread (the CPU backend); where a
// backend's then() runs at once on the caller (CUDA), the delay is instead two kernels on the comm
// stream (Note [Link on the device]), or it would block the issuing thread.
//
// Note [Link on the device]: on CUDA, NcclCommunicator brackets each collective on its comm stream
// with a 1-thread kernel that reserves the rank's link when the stream reaches it (after the wait
// for the data's producer, so at the moment the real collective could start; FIFO with the other
// stream through one 64-bit word of device memory) and a 1-thread kernel after the collective that
// spins, sleeping, until the GPU's global timer passes the reservation's end. So a collective
// completes on the stream at max(real end, start + modelled time), exactly as on the CPU, and
// everything ordered after it by events (an interleaved step on the comm stream, the next layer's
// wait for its broadcast on the compute stream) waits for the modelled link: the real overlap
// machinery runs against it. The host never blocks; results are unchanged; the spinning thread
// holds one SM slot, which compute kernels can share.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/comm/comm_options.h"

namespace zl {

// The ranks the link model times a collective for: link.ranks, or the job's `world` when 0.
int modelled_ranks(const LinkConfig& link, int world);

// Note [Link model]: seconds a collective of `payload` bytes takes on `link` among
// p = modelled_ranks(link, world) ranks, with the bandwidth-optimal ring/chain algorithms that
// wire_bytes() counts (communicator.h): all-reduce (reduce-scatter + all-gather ring)
// 2(p-1)/p * S/B + 2(p-1)*alpha; reduce (reduce-scatter + gather to the root), broadcast
// (scatter + all-gather), reduce-scatter and all-gather (p-1)/p * S/B + (p-1)*alpha each, S the
// whole buffer (all shards). No contention, no hierarchy, no
// tree algorithms; zero for p = 1. With link.ranks = 8 a one-rank job is timed as one rank of
// an 8-rank ring: the modelled times are an 8-rank job's whatever the real world size.
double modelled_seconds(const LinkConfig& link, CollectiveOp op, std::int64_t payload, int world);

// "simulated link: 10 Gb/s, 5 us" ("..., timed as 8 ranks" with link.ranks); empty when the
// link is off.
std::string link_label(const LinkConfig& link);

// One rank's network interface, shared by all of that rank's communicators: the reduce and the
// broadcast streams queue for the same wire instead of each getting a full link.
// Note [Link occupancy]: a transfer is modelled as starting when its stream issues it, or when the
// link is free again if an earlier transfer still occupies it (FIFO, no fair sharing), and
// holding the link for modelled_seconds(). A rank that waits for a late peer inside the real
// collective therefore overlaps that wait with its modelled transfer: the model never charges
// more than real time + transfer time, and charges exactly the transfer time when peers arrive
// together (bucket collectives are issued at the same point of backward on every rank).
class DeviceLink;

class SimulatedLink {
 public:
  using Clock = std::chrono::steady_clock;
  // timeout_s bounds the modelled wait as runtime.timeout_s bounds a real one: a transfer that
  // would end later than that after its issue is a RuntimeFailure, not a long sleep.
  explicit SimulatedLink(const LinkConfig& config, double timeout_s = CommOptions{}.timeout_s)
      : config_(config), timeout_s_(timeout_s) {}

  const LinkConfig& config() const { return config_; }
  double timeout_s() const { return timeout_s_; }
  // Reserves the link for `seconds` from `issued` on (or from when it is free); returns the time
  // the transfer ends.
  Clock::time_point reserve(Clock::time_point issued, double seconds);
  // The same link on the current CUDA device, for communicators on device streams.
  std::shared_ptr<DeviceLink> device();

 private:
  LinkConfig config_;
  double timeout_s_;
  std::shared_ptr<DeviceLink> device_;
  std::mutex mutex_;
  Clock::time_point busy_until_{};
};

// The link model's device side (Note [Link on the device]): one per rank, created on first use
// by SimulatedLink::device() on the calling thread's CUDA device, shared by the rank's
// communicators. Slots hold each communicator's reservation end (a stream runs one collective at
// a time). CUDA builds only; elsewhere constructing it is an InternalError.
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
  SimulatedLinkCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<SimulatedLink> link);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

  using Communicator::all_reduce;
  using Communicator::broadcast;
  using Communicator::reduce;
  Work all_reduce(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                  const ExecContext* issuing_stream = nullptr) override;
  Work reduce(void* buf, std::int64_t n, DType dtype, int root, ReduceOp op,
              const ExecContext* issuing_stream = nullptr) override;
  Work broadcast(void* buf, std::int64_t n, DType dtype, int root,
                 const ExecContext* issuing_stream = nullptr) override;
  Work reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                      const ExecContext* issuing_stream = nullptr) override;
  Work all_gather(void* buf, std::int64_t n, DType dtype,
                  const ExecContext* issuing_stream = nullptr) override;
  Work all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                       const ExecContext* issuing_stream = nullptr) override;
  Work all_reduce_f64(double* buf, std::int64_t n) override;
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
  // end) and wire_bytes (for the modelled ranks, which link.ranks may set).
  CommStats stats() const override;
  void reset_stats() override;
  void set_tracer(Tracer* tracer) override;

 private:
  // Brackets `collective` (which issues the real operation on the inner communicator) with a
  // host task that reserves the link and one that sleeps until the reservation ends.
  template <typename Issue>
  Work modelled(CollectiveOp op, std::int64_t payload_bytes, const char* label, Issue&& collective);

  std::shared_ptr<SimulatedLink> link_;
  Tracer* tracer_ = nullptr;
  mutable std::mutex stats_mutex_;
  double busy_seconds_ = 0.0;
  std::int64_t wire_bytes_ = 0;
  // Last: destroyed first, so its stream drains while the link and the mutex above still exist.
  std::unique_ptr<Communicator> inner_;
};

// Wraps `comm` when `link` is enabled (on a device stream the backend models it itself, Note
// [Link on the device]); returns it unchanged otherwise.
std::unique_ptr<Communicator> with_simulated_link(std::unique_ptr<Communicator> comm,
                                                  const std::shared_ptr<SimulatedLink>& link);

}  // namespace zl
