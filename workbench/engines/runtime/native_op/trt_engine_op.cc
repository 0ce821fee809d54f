// TRTEngineOp as TF-TRT 2.17 declared it, with a kernel that runs the engine's native segment.
//
// Saved converted models hold one TRTEngineOp node per engine, as TF-TRT's did, so code written
// for TF-TRT (`tf.saved_model.load` and counting the TRTEngineOp nodes of a signature's graph)
// works on them. TensorFlow >= 2.18 registers no such op; this library does, with TF-TRT's
// attributes and defaults (tensorflow/compiler/tf2tensorrt/ops/trt_engine_op.cc), so TF-TRT
// 2.17's own SavedModels load too. The kernel holds no engine: it always does what TF-TRT's
// kernel did when it could not build or run one, calling `segment_func` with the op's inputs.
// As TF-TRT's, it refuses to when TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION is false.
//
// TF-TRT's engine-resource ops are declared too (trt_engine_resource_ops.cc), with CPU kernels
// that keep no engine: TF-TRT's SavedModels create and fill one resource per engine when they
// load, so with these a model TF-TRT wrote loads in today's TensorFlow and runs natively.
//
// Compiled with -DWORKBENCH_KERNEL_ONLY where TRTEngineOp is registered already (TF-TRT's own
// ops loaded in TensorFlow <= 2.17, which gave them GPU kernels only): the CPU kernels alone.

#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/env.h"

namespace tensorflow {

#ifndef WORKBENCH_KERNEL_ONLY
REGISTER_OP("TRTEngineOp")
    .Attr("serialized_segment: string")
    .Attr("segment_func: func = {}")
    .Attr("InT: list({bool,int8,float16,float32,int32,resource})")
    .Attr("OutT: list({bool,int8,float16,float32,int32})")
    .Attr("input_shapes: list(shape) = []")
    .Attr("output_shapes: list(shape) = []")
    .Attr("max_cached_engines_count: int = 1")
    .Attr("max_batch_size: int = 1")
    .Attr("workspace_size_bytes: int")
    .Attr("precision_mode: {'FP32', 'FP16', 'INT8'}")
    .Attr("calibration_data: string = ''")
    .Attr("use_calibration: bool = true")
    .Input("in_tensor: InT")
    .Output("out_tensor: OutT")
    // Unknown shapes: an engine's outputs are whatever its segment gives (TF-TRT read them
    // from `output_shapes`, which the workbench does not vouch for across TF versions).
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->UnknownShape());
      return absl::OkStatus();
    })
    .Attr("segment_funcdef_name: string = ''")
    .Attr("cached_engine_batches: list(int) >= 0 = []")
    .Attr("fixed_input_size: bool = true")
    .Attr("static_engine: bool = true")
    .Attr("profile_strategy: string = ''")
    .Attr("use_explicit_precision: bool = false");

REGISTER_OP("CreateTRTResourceHandle")
    .Attr("resource_name: string")
    .Output("resource_handle: resource")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape);

REGISTER_OP("InitializeTRTResource")
    .Attr("max_cached_engines_count: int = 1")
    .Input("resource_handle: resource")
    .Input("filename: string")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

REGISTER_OP("SerializeTRTResource")
    .Attr("delete_resource: bool = false")
    .Attr("save_gpu_specific_engines: bool = True")
    .Input("resource_name: string")
    .Input("filename: string")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);
#endif

namespace {

// TF-TRT's reading of the variable: unset or anything but false/0 allows native execution.
bool NativeSegmentAllowed() {
  const char* value = std::getenv("TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION");
  if (value == nullptr) return true;
  return !(std::strcmp(value, "0") == 0 || strcasecmp(value, "false") == 0);
}

class NativeSegmentOp : public AsyncOpKernel {
 public:
  explicit NativeSegmentOp(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("segment_func", &segment_func_));
    OP_REQUIRES(context, !segment_func_.name().empty(),
                errors::InvalidArgument(name(), " has no segment_func to run natively"));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    OP_REQUIRES_ASYNC(context, NativeSegmentAllowed(),
                      errors::Aborted("User disallowed engine native segment execution"), done);
    FunctionLibraryRuntime* library = context->function_library();
    OP_REQUIRES_ASYNC(context, library != nullptr,
                      errors::Internal(name(), ": no function library to run its segment"),
                      done);
    FunctionLibraryRuntime::Handle handle;
    OP_REQUIRES_OK_ASYNC(context, Instantiated(context, library, &handle), done);

    std::vector<Tensor> inputs;
    inputs.reserve(context->num_inputs());
    for (int i = 0; i < context->num_inputs(); ++i) inputs.push_back(context->input(i));
    auto outputs = std::make_shared<std::vector<Tensor>>();

    FunctionLibraryRuntime::Options options;
    options.rendezvous = context->rendezvous();
    options.cancellation_manager = context->cancellation_manager();
    options.runner = context->runner();
    options.step_container = context->step_container();
    options.collective_executor = context->collective_executor();
    library->Run(options, handle, inputs, outputs.get(),
                 [context, outputs, done](const Status& status) {
                   if (!status.ok()) {
                     context->SetStatus(status);
                   } else if (static_cast<int>(outputs->size()) != context->num_outputs()) {
                     context->SetStatus(errors::Internal(
                         "the native segment gave ", outputs->size(), " outputs for ",
                         context->num_outputs()));
                   } else {
                     for (int i = 0; i < context->num_outputs(); ++i) {
                       context->set_output(i, (*outputs)[i]);
                     }
                   }
                   done();
                 });
  }

 private:
  // One instantiation per function library: a kernel may run under several (each function
  // that holds the node instantiates it with its own).
  // As a multi-device function, as PartitionedCall instantiates one: TensorFlow's graph
  // passes then run on the segment (oneDNN's among them, which runs the channels-first
  // convolutions and pools of a GPU-prepared segment on the CPU).
  Status Instantiated(OpKernelContext* context, FunctionLibraryRuntime* library,
                      FunctionLibraryRuntime::Handle* handle) {
    mutex_lock lock(mu_);
    auto found = handles_.find(library);
    if (found != handles_.end()) {
      *handle = found->second;
      return absl::OkStatus();
    }
    const std::string& device = context->device()->name();
    FunctionLibraryRuntime::InstantiateOptions options;
    options.target = device;
    options.is_multi_device_function = true;
    for (int i = 0; i < context->num_inputs(); ++i) {
      const Tensor& input = context->input(i);
      options.input_devices.push_back(input.dtype() == DT_RESOURCE
                                          ? input.flat<ResourceHandle>()(0).device()
                                          : device);
    }
    options.output_devices.assign(context->num_outputs(), device);
    TF_RETURN_IF_ERROR(library->Instantiate(segment_func_.name(),
                                            AttrSlice(&segment_func_.attr()), options, handle));
    handles_[library] = *handle;
    return absl::OkStatus();
  }

  NameAttrList segment_func_;
  mutex mu_;
  std::unordered_map<FunctionLibraryRuntime*, FunctionLibraryRuntime::Handle> handles_
      TF_GUARDED_BY(mu_);
};

// An engine's cache as this kernel keeps it: the serialized-engine file it was given, unread
// (its TensorRT plans run only where TF-TRT does).
class NativeEngineCache : public ResourceBase {
 public:
  std::string DebugString() const override { return "TF-TRT engine cache (native): " + file; }
  std::string file;
};

constexpr char kContainer[] = "TF-TRT";

class CreateResourceHandleOp : public OpKernel {
 public:
  explicit CreateResourceHandleOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("resource_name", &resource_name_));
  }

  void Compute(OpKernelContext* context) override {
    Tensor* handle = nullptr;
    AllocatorAttributes host;
    host.set_on_host(true);
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &handle, host));
    handle->scalar<ResourceHandle>()() =
        MakeResourceHandle<NativeEngineCache>(context, kContainer, resource_name_);
  }

 private:
  std::string resource_name_;
};

class InitializeResourceOp : public OpKernel {
 public:
  explicit InitializeResourceOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const ResourceHandle& handle = HandleFromInput(context, 0);
    core::RefCountPtr<NativeEngineCache> cache;
    OP_REQUIRES_OK(context, LookupOrCreateResource<NativeEngineCache>(
                                context, handle, &cache, [](NativeEngineCache** made) {
                                  *made = new NativeEngineCache();
                                  return absl::OkStatus();
                                }));
    cache->file = context->input(1).scalar<tstring>()();
  }
};

// What TF-TRT wrote without engines: an empty file (this process never has TensorRT plans).
class SerializeResourceOp : public OpKernel {
 public:
  explicit SerializeResourceOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const std::string filename(context->input(1).scalar<tstring>()());
    std::unique_ptr<WritableFile> file;
    OP_REQUIRES_OK(context, context->env()->NewWritableFile(filename, &file));
    OP_REQUIRES_OK(context, file->Close());
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TRTEngineOp").Device(DEVICE_CPU), NativeSegmentOp);
REGISTER_KERNEL_BUILDER(Name("CreateTRTResourceHandle").Device(DEVICE_CPU),
                        CreateResourceHandleOp);
REGISTER_KERNEL_BUILDER(Name("InitializeTRTResource").Device(DEVICE_CPU), InitializeResourceOp);
REGISTER_KERNEL_BUILDER(Name("SerializeTRTResource").Device(DEVICE_CPU), SerializeResourceOp);

}  // namespace tensorflow
