// LibTorch adapter: to_view, snapshot_module and the CUDA caching-allocator source.
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstring>

#include "genscope/torch.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "genscope/error.hpp"

#ifdef GENSCOPE_LIBTORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace genscope {

std::optional<DType> to_dtype(at::ScalarType type) noexcept {
  switch (type) {
    case at::kDouble:
      return DType::kF64;
    case at::kFloat:
      return DType::kF32;
    case at::kHalf:
      return DType::kF16;
    case at::kBFloat16:
      return DType::kBF16;
    case at::kLong:
      return DType::kI64;
    case at::kInt:
      return DType::kI32;
    case at::kShort:
      return DType::kI16;
    case at::kChar:
      return DType::kI8;
    case at::kByte:
      return DType::kU8;
    case at::kBool:
      return DType::kBool;
    default:
      return std::nullopt;
  }
}

TorchTensorView to_view(const at::Tensor& tensor) {
  const auto dtype = to_dtype(tensor.scalar_type());
  if (!dtype) {
    throw Error("UnsupportedDType", std::string("tensor dtype ") +
                                        c10::toString(tensor.scalar_type()) +
                                        " has no genscope equivalent");
  }
  TorchTensorView out;
  out.view.device = tensor.device().str();
  if (tensor.is_cpu()) {
    out.holder = tensor;
    out.view.strides.assign(tensor.strides().begin(), tensor.strides().end());
  } else {
    out.holder = tensor.detach().to(at::kCPU).contiguous();
    out.copied_to_host = true;
    out.note = "statistics computed after a device-to-host copy";
  }
  out.view.data = out.holder.data_ptr();
  out.view.shape.assign(out.holder.sizes().begin(), out.holder.sizes().end());
  out.view.dtype = *dtype;
  if (out.holder.is_contiguous()) out.view.strides.clear();
  return out;
}

#ifdef GENSCOPE_TORCH_HAS_MODEL_SNAPSHOT
ParameterInfo parameter_info(const at::Tensor& t, bool hash) {
  ParameterInfo p;
  p.shape.assign(t.sizes().begin(), t.sizes().end());
  p.dtype = to_dtype(t.scalar_type()).value_or(DType::kU8);
  p.device = t.device().str();
  p.bytes = static_cast<std::uint64_t>(t.numel()) * t.element_size();
  if (hash) {
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    p.content_hash = XXH3_64bits(c.data_ptr(), p.bytes);
  }
  return p;
}

ModelSnapshot snapshot_module(const torch::nn::Module& module, std::string class_name, bool hash) {
  ModelSnapshot s;
  char id[32];
  std::snprintf(id, sizeof id, "%p", static_cast<const void*>(&module));
  s.id = id;
  s.class_name = class_name.empty() ? module.name() : std::move(class_name);
  for (const auto& item : module.named_parameters(/*recurse=*/true)) s.parameters[item.key()] = parameter_info(item.value(), hash);
  for (const auto& item : module.named_buffers(/*recurse=*/true)) s.parameters[item.key()] = parameter_info(item.value(), hash);
  if (!s.parameters.empty()) s.device = s.parameters.begin()->second.device;
  s.load_device = s.device;
  s.offload_device = "cpu";
  return s;
}
#endif

#ifdef GENSCOPE_LIBTORCH_CUDA
namespace {
class CudaAllocatorSource final : public AllocatorSource {
 public:
  explicit CudaAllocatorSource(int device) : device_(device) {}
  std::string device() const override { return "cuda:" + std::to_string(device_); }
  bool read(AllocatorFigures& out, std::string& error) override {
    try {
      // StatType::AGGREGATE is index 0 in every LibTorch; the enum itself moved out of
      // c10::cuda::CUDACachingAllocator (recent torch/csrc/cuda/Module.cpp,
      // THCPModule_memoryStats, names c10::CachingAllocator::StatType), so it is not named
      // here: the same source compiles against old and new LibTorch.
      constexpr std::size_t kAggregate = 0;
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_);
      const auto& a = stats.allocated_bytes[kAggregate];
      const auto& r = stats.reserved_bytes[kAggregate];
      out.allocated_bytes = static_cast<double>(a.current);
      out.peak_allocated_bytes = static_cast<double>(a.peak);
      out.reserved_bytes = static_cast<double>(r.current);
      out.peak_reserved_bytes = static_cast<double>(r.peak);
      return true;
    } catch (const std::exception& e) {
      error = e.what();
      return false;
    }
  }
  bool reset_peaks(std::string& error) override {
    try {
      c10::cuda::CUDACachingAllocator::resetPeakStats(device_);
      return true;
    } catch (const std::exception& e) {
      error = e.what();
      return false;
    }
  }

 private:
  int device_;
};
}  // namespace

std::shared_ptr<AllocatorSource> make_cuda_allocator_source(int device) {
  return std::make_shared<CudaAllocatorSource>(device);
}
#else
std::shared_ptr<AllocatorSource> make_cuda_allocator_source(int /*device*/) { return nullptr; }
#endif

int add_torch_allocator_probes(Monitor& monitor) {
  if (!at::hasCUDA()) return 0;
  int added = 0;
  const int n = static_cast<int>(at::detail::getCUDAHooks().getNumGPUs());
  for (int d = 0; d < n; ++d) {
    if (auto source = make_cuda_allocator_source(d)) {
      monitor.add_probe(make_allocator_probe(std::move(source)));
      ++added;
    }
  }
  return added;
}

}  // namespace genscope
