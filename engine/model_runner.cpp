#include "engine/model_runner.h"

#include "engine/cpu_model_runner.h"

#ifdef LORAGATE_HAVE_CUDA
#include <iostream>

#include "engine/cuda/cuda_model_runner.h"
#include "kernels/cuda/cuda_device.h"
#endif

namespace loragate {

Result<std::unique_ptr<ModelRunner>> load_model_runner(const ModelDir& dir, const RunnerOptions& options) {
  if (options.device.kind == Device::Kind::kCuda) {
#ifdef LORAGATE_HAVE_CUDA
    const int count = cuda::cuda_device_count();
    if (options.device.index >= count) {
      return Status::unavailable("device " + options.device.name() + ": this machine has " + std::to_string(count) +
                                 " CUDA device(s)");
    }
    // Written and built without a GPU: say so until a device run has checked it.
    std::cerr << "loragate: warning: the CUDA model runner has not yet been verified on a device; "
                 "scripts/gpu-check.sh checks it\n";
    LG_ASSIGN_OR_RETURN(std::unique_ptr<CudaModelRunner> cuda, CudaModelRunner::load(dir, options));
    return std::unique_ptr<ModelRunner>(std::move(cuda));
#else
    return Status::unsupported("device " + options.device.name() + ": this build has no CUDA (configure with nvcc)");
#endif
  }
  LG_ASSIGN_OR_RETURN(std::unique_ptr<CpuModelRunner> cpu, CpuModelRunner::load(dir, options));
  return std::unique_ptr<ModelRunner>(std::move(cpu));
}

}  // namespace loragate
