// The background shard writer (see async_shard_writer.h).
#include "runtime/checkpoint/async_shard_writer.h"

#include "base/errors.h"

namespace zl {

AsyncShardWriter::~AsyncShardWriter() {
  if (thread_.joinable()) thread_.join();
}

StagedShard& AsyncShardWriter::staging() {
  ZL_CHECK(!in_flight(), "a shard's staging buffer reused while its write is in flight");
  return shard_;
}

void AsyncShardWriter::start() {
  ZL_CHECK(!in_flight(), "a second checkpoint write started while one is in flight");
  finished_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  // The thread reads shard_ only; the main thread touches it again only after collect() joined.
  thread_ = std::thread([this] {
    try {
      result_ = write_shard(shard_);
    } catch (...) {
      error_ = std::current_exception();
    }
    finished_.store(true, std::memory_order_release);
  });
}

WrittenShard AsyncShardWriter::collect() {
  ZL_CHECK(in_flight(), "collecting a checkpoint write that was never started");
  thread_.join();
  if (error_) std::rethrow_exception(error_);
  return result_;
}

}  // namespace zl
