// The hand measurement behind docs/bench.md "The CPU GEMM": single-thread GFLOP/s of OpenBLAS's
// cblas_sgemm (whatever core OPENBLAS_CORETYPE or its CPU-model table gives) and of oneDNN's f32
// and bf16 matmul, on the shapes given, with the layers' transposes (forward x W^T, backward_data
// dy W, backward_weight dy^T x). Built and run by scripts/gemm_kernels.sh; not part of zerolap.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <dnnl.hpp>

namespace {

double best_seconds(const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  const auto begin = std::chrono::steady_clock::now();
  for (int reps = 0; reps < 5 || std::chrono::steady_clock::now() - begin < std::chrono::milliseconds(300); ++reps) {
    const auto t = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

struct Shape {
  std::string pass;
  long m, n, k;
};

double openblas_gflops(const Shape& s) {
  std::vector<float> a(s.m * s.k, 0.5f), b(s.k * s.n, 0.25f), c(s.m * s.n);
  const bool ta = s.pass == "backward_weight", tb = s.pass == "forward";
  const double t = best_seconds([&] {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, s.m,
                s.n, s.k, 1.0f, a.data(), ta ? s.m : s.k, b.data(), tb ? s.k : s.n, 0.0f,
                c.data(), s.n);
  });
  return 2.0 * s.m * s.n * s.k / t * 1e-9;
}

double onednn_gflops(const Shape& s, dnnl::memory::data_type dt, std::string* impl) {
  using tag = dnnl::memory::format_tag;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const bool ta = s.pass == "backward_weight", tb = s.pass == "forward";
  const dnnl::memory::desc a({s.m, s.k}, dt, ta ? tag::ba : tag::ab);
  const dnnl::memory::desc b({s.k, s.n}, dt, tb ? tag::ba : tag::ab);
  const dnnl::memory::desc c({s.m, s.n}, dnnl::memory::data_type::f32, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
  *impl = pd.impl_info_str();
  dnnl::memory am(a, engine), bm(b, engine), cm(c, engine);
  const dnnl::matmul mm(pd);
  const double t = best_seconds([&] {
    mm.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
  });
  return 2.0 * s.m * s.n * s.k / t * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (argc - 2) % 4 != 0) {
    std::fprintf(stderr, "usage: %s openblas|onednn [PASS M N K]...\n", argv[0]);
    return 2;
  }
  const std::string lib = argv[1];
  std::vector<Shape> shapes;
  for (int i = 2; i + 3 < argc; i += 4) {
    shapes.push_back({argv[i], std::atol(argv[i + 1]), std::atol(argv[i + 2]), std::atol(argv[i + 3])});
  }
  openblas_set_num_threads(1);
  if (lib == "openblas") {
    std::printf("OpenBLAS %-12s f32:", openblas_get_corename());
    for (const Shape& s : shapes) std::printf(" %6.1f", openblas_gflops(s));
    std::printf("\n");
  } else {
    std::string f32_impl, bf16_impl;
    std::vector<double> f32, bf16;
    for (const Shape& s : shapes) {
      f32.push_back(onednn_gflops(s, dnnl::memory::data_type::f32, &f32_impl));
      bf16.push_back(onednn_gflops(s, dnnl::memory::data_type::bf16, &bf16_impl));
    }
    std::printf("oneDNN %-14s f32:", f32_impl.c_str());
    for (double g : f32) std::printf(" %6.1f", g);
    std::printf("\noneDNN %-14s bf16:", bf16_impl.c_str());
    for (double g : bf16) std::printf(" %6.1f", g);
    std::printf("\n");
  }
  return 0;
}
