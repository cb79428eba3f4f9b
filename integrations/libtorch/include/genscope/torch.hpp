// LibTorch adapter: tensors as genscope TensorViews, modules as ModelSnapshots, and the CUDA
// caching allocator as an AllocatorSource (compiled when LibTorch has CUDA).
//
// Example:
//   genscope::Monitor monitor;
//   genscope::add_torch_allocator_probe(monitor);  // no-op without CUDA
//   genscope::TorchTensorView v = genscope::to_view(conditioning);
//   analyze(v.view);  // v keeps a host copy alive when the tensor was on a GPU
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>

#include "genscope/dtype.hpp"
#include "genscope/monitor.hpp"
#include "genscope/probe.hpp"
#include "genscope/tensor_view.hpp"

#if __has_include("genscope/model_snapshot.hpp")
#include <torch/nn/module.h>

#include "genscope/model_snapshot.hpp"
#define GENSCOPE_TORCH_HAS_MODEL_SNAPSHOT 1
#endif

namespace genscope {

/// A TensorView of an at::Tensor plus whatever keeps its bytes alive.
struct TorchTensorView {
  TensorView view;    ///< Host view: zero-copy for CPU tensors, else of `holder`.
  at::Tensor holder;  ///< The tensor whose memory `view` points into.
  bool copied_to_host = false;
  /// "statistics computed after a device-to-host copy" when copied, else empty.
  std::string note;
};

/// The genscope dtype of a LibTorch scalar type; nullopt for complex/quantized types.
std::optional<DType> to_dtype(at::ScalarType type) noexcept;

/// Views a tensor. CPU tensors are viewed in place (strides kept, no copy); tensors on any
/// other device are copied to host first (note set). Throws genscope::Error
/// ("UnsupportedDType") naming the dtype.
TorchTensorView to_view(const at::Tensor& tensor);

#ifdef GENSCOPE_TORCH_HAS_MODEL_SNAPSHOT
/// The parameter-table entry of one tensor (shape, dtype, device, bytes; XXH3 content hash
/// of a host copy when `hash`).
ParameterInfo parameter_info(const at::Tensor& tensor, bool hash = false);
/// Snapshot of a module's parameters and buffers (state-dict keys, shapes, dtypes, devices;
/// XXH3 content hashes of host copies when `hash`).
ModelSnapshot snapshot_module(const torch::nn::Module& module, std::string class_name = {},
                              bool hash = false);
#endif

/// The CUDA caching allocator of `device` (allocated/reserved current and exact peaks via
/// getDeviceStats, peaks reset with resetPeakStats). nullptr when LibTorch has no CUDA.
std::shared_ptr<AllocatorSource> make_cuda_allocator_source(int device = 0);

/// Adds an allocator probe for every visible CUDA device; returns how many were added.
int add_torch_allocator_probes(Monitor& monitor);

}  // namespace genscope
