// What the communication layer takes from a run's config, defined here so that communicators do
// not depend on runtime/config (which pulls in models and data): the device choice, the comm
// threads' priority, a collective's timeout and the modelled link. runtime/config embeds these in
// its [runtime] and [link] sections; to_string and the key names live there.
#pragma once

namespace zl {

// runtime.device: where the model runs, resolved the same way on every rank
// (runtime/comm/backends/device.h).
enum class DeviceChoice { Auto, Cpu, Cuda };

// runtime.threads = "auto": each rank runs World::cpus_per_rank CPU GEMM threads.
inline constexpr int kAutoThreads = 0;

// Scheduling of the CPU comm threads (runtime/comm/thread_priority.h, Note [Comm thread priority]).
enum class CommPriority { Normal, Realtime };

// What a communicator is built with (Device::make_communicator).
struct CommOptions {
  double timeout_s = 300;  // a collective that takes longer is a failure (exit 1), not a hang
  CommPriority priority = CommPriority::Normal;  // of the MPI comm threads; a hint
};

// The range of the [link] model (checked by load_config): wide beyond any real network, and small
// enough that a modelled time is always a finite duration.
inline constexpr double kMinLinkBandwidthGbps = 1e-6;
inline constexpr double kMaxLinkBandwidthGbps = 1e6;
inline constexpr double kMaxLinkLatencyUs = 1e7;

// [link]: a modelled network, on the CPU or a GPU (runtime/comm/link/simulated_link.h).
struct LinkConfig {
  double bandwidth_gbps = 0.0;  // 0: no network model
  double latency_us = 0.0;
  // Ranks the model times each collective for (a ring of this many ranks on this link); 0: the
  // job's real world size. Lets one GPU or CPU study a cluster's overlap (docs/bench.md).
  int ranks = 0;
  // Two tiers (Note [Link model], simulated_link.h): consecutive groups of node_ranks ranks share
  // a modelled node whose links run at intra_gbps; bandwidth_gbps is then each rank's port
  // between nodes. 0: one tier, every collective at bandwidth_gbps.
  int node_ranks = 0;
  double intra_gbps = 0.0;
  bool enabled() const { return bandwidth_gbps > 0.0 || latency_us > 0.0; }
};

// Where a communicator's collectives run on the modelled machine: between nodes (the network
// port, link.bandwidth_gbps) or inside one node (link.intra_gbps).
enum class LinkTier { Inter, Intra };

// The ranks the link model times a communicator's collectives for (a ring of that many), and the
// tier of its slowest hop: link_span() (simulated_link.h) derives it from where the members sit.
struct LinkSpan {
  int ranks = 1;
  LinkTier tier = LinkTier::Inter;
};

}  // namespace zl
