// ParameterStore: Note [Flat layout] (reverse registration order, kAlignFloats offsets, zero
// padding), lookups and the (rows, cols) views; registration mistakes are internal errors.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.h"
#include "models/parameter_store.h"

namespace zl {

TEST_CASE("parameter store lays out in reverse registration order, aligned", "[models]") {
  ParameterStore store;
  CHECK(store.add("a.weight", {3, 5}) == 0);   // 15
  CHECK(store.add("a.bias", {3}) == 1);        // 3
  CHECK(store.add("b.weight", {16}) == 2);     // exactly one alignment unit
  CHECK(store.add("c.weight", {17, 2}) == 3);  // 34
  CHECK(!store.finalized());
  store.finalize(DeviceKind::Cpu);
  REQUIRE(store.finalized());
  CHECK(store.device() == DeviceKind::Cpu);

  constexpr std::int64_t kA = ParameterStore::kAlignFloats;
  CHECK(store.info(3).offset == 0);
  CHECK(store.info(2).offset == 48);
  CHECK(store.info(1).offset == 64);
  CHECK(store.info(0).offset == 80);
  CHECK(store.total_numel() == 96);
  CHECK(store.parameter_numel() == 15 + 3 + 16 + 34);
  CHECK(store.ids_in_layout_order() == std::vector<int>{3, 2, 1, 0});

  // Offsets aligned and increasing along the layout order; regions disjoint and within bounds.
  std::int64_t end = 0;
  for (int id : store.ids_in_layout_order()) {
    const ParameterInfo& p = store.info(id);
    CHECK(p.offset % kA == 0);
    CHECK(p.offset >= end);
    end = p.offset + p.numel;
  }
  CHECK(end <= store.total_numel());

  // Zero-initialised, padding included, in both buffers.
  for (std::int64_t i = 0; i < store.total_numel(); ++i) {
    CHECK(store.data()[i] == 0.0f);
    CHECK(store.grad()[i] == 0.0f);
  }
}

TEST_CASE("parameter store lookups and views", "[models]") {
  ParameterStore store;
  store.add("layers.0.weight", {4, 3});
  store.add("layers.0.bias", {4});
  store.finalize(DeviceKind::Cpu);

  CHECK(store.count() == 2);
  CHECK(store.find("layers.0.bias") == 1);
  CHECK(store.find("layers.0.weight") == 0);
  CHECK(store.find("layers.1.weight") == -1);
  CHECK(store.parameters()[0].name == "layers.0.weight");
  CHECK(store.info(0).shape == std::vector<std::int64_t>{4, 3});
  CHECK(store.info(0).numel == 12);

  const Tensor w = store.param_tensor(0);
  CHECK(w.rows == 4);
  CHECK(w.cols == 3);
  CHECK(w.f32() == store.param_data(0));
  CHECK(w.f32() == store.data() + store.info(0).offset);
  const Tensor gb = store.grad_tensor(1);
  CHECK(gb.rows == 1);
  CHECK(gb.cols == 4);
  CHECK(gb.f32() == store.param_grad(1));
  CHECK(gb.f32() == store.grad() + store.info(1).offset);
}

TEST_CASE("parameter store rejects registration mistakes as internal errors", "[models]") {
  ParameterStore store;
  store.add("x", {2});
  CHECK_THROWS_AS(store.add("x", {3}), InternalError);
  CHECK_THROWS_AS(store.add("y", {0}), InternalError);
  CHECK_THROWS_AS(store.add("z", {1, 2, 3}), InternalError);
  CHECK_THROWS_AS(store.param_tensor(0), InternalError);  // before finalize
  store.finalize(DeviceKind::Cpu);
  CHECK_THROWS_AS(store.add("w", {2}), InternalError);
  CHECK_THROWS_AS(store.finalize(DeviceKind::Cpu), InternalError);
}

TEST_CASE("parameter store registers and finds many parameters in linear time", "[models]") {
  // A model of tens of thousands of layers (a generated config) is built and planned in well
  // under a second; a search through every earlier name per registration took minutes at this
  // count.
  constexpr int kCount = 100000;
  ParameterStore store;
  for (int id = 0; id < kCount; ++id) {
    REQUIRE(store.add("layers." + std::to_string(id) + ".weight", {1}) == id);
  }
  for (int id = 0; id < kCount; id += 997) {
    CHECK(store.find("layers." + std::to_string(id) + ".weight") == id);
  }
  CHECK(store.find("layers.100000.weight") == -1);
  // A name is still refused twice, and a refused registration is not found afterwards.
  CHECK_THROWS_WITH(store.add("layers.7.weight", {1}),
                    Catch::Contains("parameter 'layers.7.weight' registered twice"));
  CHECK_THROWS_AS(store.add("bad", {0}), InternalError);
  CHECK(store.find("bad") == -1);
  CHECK(store.count() == kCount);
}

TEST_CASE("a moved parameter store keeps its pointers", "[models]") {
  ParameterStore a;
  a.add("p", {5});
  a.finalize(DeviceKind::Cpu);
  float* data = a.param_data(0);
  float* grad = a.param_grad(0);
  ParameterStore b = std::move(a);
  CHECK(b.param_data(0) == data);
  CHECK(b.param_grad(0) == grad);
}


TEST_CASE("a store with bound gradients allocates none and hands out the bound memory",
          "[models]") {
  // ZeRO stage 2 binds each parameter's gradient into a pool buffer (runtime/train/step/gradient_pool.h).
  ParameterStore store;
  store.add("w", {4, 3});
  store.add("b", {4});
  store.finalize(DeviceKind::Cpu, DType::F32, {}, GradientStorage::Bound);
  CHECK(store.grad_bytes() == 0);
  CHECK(store.grad() == nullptr);
  CHECK(store.param_bytes() == store.total_numel() * 4);
  std::vector<float> pool(32, 0.0f);
  store.bind_gradient(0, pool.data() + 16);
  store.bind_gradient(1, pool.data());
  CHECK(store.param_grad(0) == pool.data() + 16);
  const Tensor gw = store.grad_tensor(0);
  CHECK(gw.f32() == pool.data() + 16);
  CHECK(gw.rows == 4);
  CHECK(gw.cols == 3);
  CHECK(store.grad_tensor(1).f32() == pool.data());
  CHECK_THROWS_AS(store.bind_gradient(2, pool.data()), InternalError);

  ParameterStore flat;
  flat.add("w", {2});
  flat.finalize(DeviceKind::Cpu);
  CHECK_THROWS_AS(flat.bind_gradient(0, pool.data()), InternalError);
}

}  // namespace zl
