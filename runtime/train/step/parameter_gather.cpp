// ParameterGather: ZeRO stage 3's shards, gather buffers and their schedule (parameter_gather.h,
// Note [Parameter gathers]).
#include "runtime/train/step/parameter_gather.h"

#include "base/bf16.h"
#include "base/errors.h"
#include "base/tracer.h"
#include "kernels/elementwise.h"
#include "runtime/comm/backends/device.h"
#include "runtime/comm/traced_collective.h"

namespace zl {

ParameterShards::ParameterShards(const ModePlan& mode, const BucketPlan& plan,
                                 const ParameterStore& store, int rank,
                                 const InitialValues& initial) {
  ZL_CHECK(mode.gathers_parameters() && store.storage() == ParamStorage::Gathered,
           "parameter shards for {} on a store with flat parameters", mode.name());
  ZL_CHECK(static_cast<bool>(initial), "parameter shards need the initial values");
  std::vector<Bf16> rounded;
  for (const Bucket& b : plan.buckets) {
    const ElementRange range = mode.stepped_range(plan, b, rank);
    DeviceBuffer& shard = buckets.emplace_back(store.device(), range.numel, store.param_dtype());
    const std::vector<float> values = initial(range.offset, range.numel);
    const float* init = values.data();
    if (shard.dtype() == DType::BF16) {
      // As Model::initialize_parameters: the bf16 parameter that goes with the fp32 master.
      rounded.resize(static_cast<std::size_t>(range.numel));
      for (std::size_t i = 0; i < rounded.size(); ++i) rounded[i] = master_to_bf16(init[i]);
      copy_from_host(rounded.data(), shard.data<Bf16>(), store.device(), range.numel);
    } else {
      copy_from_host(init, shard.data(), store.device(), range.numel);
    }
  }
}

namespace {

// The shards' spans as T, for one total_sum_of_squares: on CUDA one read-back for all buckets.
template <class T>
double sum_of_squares_as(const ExecContext& exec, const std::vector<DeviceBuffer>& buckets) {
  std::vector<ReadSpan<T>> spans;
  for (const DeviceBuffer& s : buckets) spans.push_back({s.data<T>(), s.size()});
  return total_sum_of_squares(exec, spans.data(), static_cast<std::int64_t>(spans.size()));
}

}  // namespace

double ParameterShards::sum_of_squares(const ExecContext& exec) const {
  if (buckets.empty()) return 0.0;
  return buckets.front().dtype() == DType::BF16 ? sum_of_squares_as<Bf16>(exec, buckets)
                                                : sum_of_squares_as<float>(exec, buckets);
}

ParameterGather::ParameterGather(const StepContext& step, const ParameterShards& shards,
                                 BucketOps& bucket_ops, Communicator& comm)
    : step_(step), shards_(shards), bucket_ops_(bucket_ops), comm_(comm) {
  const BucketPlan& plan = step.plan;
  const std::int64_t buffers = step.mode.gather_buffers(plan);
  for (std::int64_t i = 0; i < buffers; ++i) {
    buffers_.emplace_back(step.store.device(), plan.largest_bucket_numel(),
                          step.store.param_dtype());
  }
  for (std::int64_t i = buffers - 1; i >= 0; --i) free_.push_back(static_cast<int>(i));
  resident_.resize(plan.buckets.size());
}

void ParameterGather::read(int param_id, Pass pass, InProgram in_program) {
  const int bucket = step_.plan.bucket_of_param[static_cast<std::size_t>(param_id)];
  if (pass != pass_) {
    pass_ = pass;
    current_ = -1;
  }
  if (bucket != current_) {
    // The buckets behind this one in the pass are done (Note [Parameter gathers]).
    const int count = static_cast<int>(step_.plan.buckets.size());
    if (pass == Pass::Backward) {
      for (int b = 0; b < bucket; ++b) release(b);
    } else if (step_.mode.reshard_after_forward) {
      for (int b = bucket + 1; b < count; ++b) release(b);
    }
    current_ = bucket;
    // This pass reads bucket b: forward reads every bucket, backward those with
    // Bucket::read_in_backward (from which ModePlan::collectives counts backward's gathers).
    const auto reads = [&](int b) {
      return pass == Pass::Forward || step_.bucket(b).read_in_backward;
    };
    ZL_CHECK(reads(bucket),
             "backward read parameter {} of bucket {}, which the layout marks as not read in "
             "backward",
             param_id, bucket);
    if (resident_[static_cast<std::size_t>(bucket)].slot < 0) issue(bucket, in_program);
    // Prefetch: the next `prefetch` buckets this pass reads, issued before the wait below.
    const int direction = pass == Pass::Forward ? -1 : 1;
    int ahead = 0;
    for (int next = bucket + direction; next >= 0 && next < count && ahead < step_.mode.prefetch;
         next += direction) {
      if (!reads(next)) continue;
      ++ahead;
      if (resident_[static_cast<std::size_t>(next)].slot < 0) issue(next, in_program);
    }
    wait(bucket);
  }
  step_.notify(StepEvent::Kind::ParameterRead, bucket);
}

void ParameterGather::issue(int bucket, InProgram in_program) {
  const Bucket& b = step_.bucket(bucket);
  const DType dtype = step_.store.param_dtype();
  if (in_program == InProgram::Yes) {
    step_.program.issued(
        {CommRole::Broadcast, CollectiveOp::AllGather, bucket, b.numel, micro_, dtype, -1});
  }
  // After the bucket's step (interleaved: its continuation on the reduce stream).
  bucket_ops_.wait_for_bucket(bucket);
  ZL_CHECK(!free_.empty(), "bucket {}: no free gather buffer of {}", bucket, buffers_.size());
  Resident& r = resident_[static_cast<std::size_t>(bucket)];
  r.slot = free_.back();
  free_.pop_back();
  r.waited = false;
  void* buffer = buffers_[static_cast<std::size_t>(r.slot)].raw();
  const void* shard = shards_.at(bucket);
  // The collective copies the shard into its place (no pass over it on the compute stream).
  r.work = traced_collective(comm_, step_.tracer, bucket, collective_name(CollectiveOp::AllGather),
                             b.numel * dtype_size(dtype), [&] {
    return comm_.all_gather_from(shard, buffer, b.numel, dtype, &step_.compute);
  });
  step_.notify(StepEvent::Kind::GatherIssued, bucket);
}

void ParameterGather::wait(int bucket) {
  Resident& r = resident_[static_cast<std::size_t>(bucket)];
  if (r.waited) return;
  {
    // The compute stream idles here until the gather completed: a "wait" span, as the per-layer
    // wait for a broadcast (Note [Exposed communication], runtime/trace/timeline_summary.h).
    TimelineScope timed(step_.timeline(), step_.compute, "compute", "wait", bucket);
    r.work.stream_wait(step_.compute);
  }
  r.waited = true;
  const Bucket& b = step_.bucket(bucket);
  step_.store.bind(b.param_ids, buffers_[static_cast<std::size_t>(r.slot)].raw(), b.offset);
  step_.notify(StepEvent::Kind::GatherDone, bucket);
}

void ParameterGather::release(int bucket) {
  Resident& r = resident_[static_cast<std::size_t>(bucket)];
  if (r.slot < 0) return;
  // A prefetched gather nobody waited for still writes its buffer: order its reuse after it.
  if (!r.waited) r.work.stream_wait(step_.compute);
  step_.store.unbind(step_.bucket(bucket).param_ids);
  free_.push_back(r.slot);
  r = Resident{};
  step_.notify(StepEvent::Kind::GatherReleased, bucket);
}

void ParameterGather::release_below(int end) {
  for (int b = 0; b < end; ++b) release(b);
  current_ = -1;
  pass_ = Pass::Forward;
}

void ParameterGather::gather_pass() {
  release_all();
  for (int b = static_cast<int>(resident_.size()) - 1; b >= 0; --b) {
    issue(b, InProgram::No);
    wait(b);
    release(b);
  }
}

std::vector<float> ParameterGather::full_parameters() {
  release_all();
  const ParameterStore& store = step_.store;
  std::vector<float> out(static_cast<std::size_t>(store.total_numel()), 0.0f);
  std::vector<Bf16> host_bf16;
  for (const Bucket& b : step_.plan.buckets) {
    issue(b.index, InProgram::No);
    wait(b.index);
    const void* buffer = buffers_[static_cast<std::size_t>(resident_[b.index].slot)].raw();
    synchronize_stream(step_.compute);
    if (store.param_dtype() == DType::BF16) {
      host_bf16.resize(static_cast<std::size_t>(b.numel));
      copy_to_host(static_cast<const Bf16*>(buffer), store.device(), host_bf16.data(), b.numel);
      for (std::int64_t i = 0; i < b.numel; ++i) {
        out[static_cast<std::size_t>(b.offset + i)] =
            bf16_to_float(host_bf16[static_cast<std::size_t>(i)]);
      }
    } else {
      copy_to_host(static_cast<const float*>(buffer), store.device(), out.data() + b.offset,
                   b.numel);
    }
    release(b.index);
  }
  return out;
}

}  // namespace zl
