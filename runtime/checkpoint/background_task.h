// A background writer of one rank's checkpoint shard (checkpoint.async): start() hands it a staged
// shard and returns at once; a thread writes and fsyncs the file while training goes on. At most
// one write is in flight: start() requires the previous one collected. The thread does file I/O
// only (no MPI, no device), so it needs nothing from the training loop.
#pragma once

#include <atomic>
#include <exception>
#include <thread>

#include "runtime/checkpoint/sharded_checkpoint.h"

namespace zl {

class AsyncShardWriter {
 public:
  AsyncShardWriter() = default;
  // Waits for a write in flight (its file stays uncommitted: no manifest names it).
  ~AsyncShardWriter();
  AsyncShardWriter(const AsyncShardWriter&) = delete;
  AsyncShardWriter& operator=(const AsyncShardWriter&) = delete;

  // The staging buffer of the next shard (its memory is reused from one checkpoint to the next).
  // Only while no write is in flight.
  StagedShard& staging();
  // Starts writing staging() in the background.
  void start();
  bool in_flight() const { return thread_.joinable(); }
  // Whether the write in flight has finished, durable or failed (never blocks).
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Waits for the write in flight and returns its size and CRC; rethrows its failure
  // (RuntimeFailure naming the rank and the file).
  WrittenShard collect();

 private:
  StagedShard shard_;
  std::thread thread_;
  std::atomic<bool> finished_{false};
  WrittenShard result_;
  std::exception_ptr error_;
};

}  // namespace zl
