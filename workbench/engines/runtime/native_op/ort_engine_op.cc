// WorkbenchOrtEngine: a TensorFlow op that runs one built ONNX Runtime engine in place.
//
// The Python path (a numpy_function) costs ~0.05 ms per call before any work; this op calls
// ONNX Runtime's C API on TensorFlow's own buffers instead. Sessions live in a process-wide
// registry filled from Python (ctypes, `wb_ort_register`); the op names its session by key, so
// graphs never carry model bytes. Whatever keeps an engine from running here (no session, input
// shapes no profile accepts, an ONNX Runtime error) fails the call with
// "workbench-engine-miss[<engine>]", and the converted model reruns it on the Python path.
//
// ONNX Runtime ships no header in its wheel: below are our own declarations of the few entries
// of its C API function table we call. The table only ever grows, so an entry's index is fixed
// across releases; the indices were read from onnxruntime_c_api.h (struct OrtApi).

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace wb_ort {

struct OrtStatus;
struct Env;
struct Session;
struct SessionOptions;
struct Value;
struct MemoryInfo;
struct TypeAndShape;

// Indices into the OrtApi function table.
enum Slot : int {
  kCreateStatus = 0,
  kGetErrorCode = 1,
  kGetErrorMessage = 2,
  kCreateEnv = 3,
  kCreateSession = 7,
  kRun = 9,
  kCreateSessionOptions = 10,
  kSetGraphOptimizationLevel = 23,
  kSetIntraOpNumThreads = 24,
  kSetInterOpNumThreads = 25,
  kCreateTensorWithDataAsOrtValue = 49,
  kGetTensorMutableData = 51,
  kGetDimensionsCount = 61,
  kGetDimensions = 62,
  kGetTensorTypeAndShape = 65,
  kCreateCpuMemoryInfo = 69,
  kReleaseEnv = 92,
  kReleaseStatus = 93,
  kReleaseMemoryInfo = 94,
  kReleaseSession = 95,
  kReleaseValue = 96,
  kReleaseTypeAndShape = 99,
  kReleaseSessionOptions = 100,
  kAddSessionConfigEntry = 130,
  kCreateAndRegisterAllocator = 144,
};
// The oldest API version whose table reaches every slot above (and whose order we checked).
constexpr unsigned kMinApiVersion = 13;

struct ApiBase {
  const void* const* (*GetApi)(unsigned version);
  const char* (*GetVersionString)();
};

const void* const* api = nullptr;
Env* env = nullptr;
MemoryInfo* cpu_memory = nullptr;
std::string api_version;

template <typename F>
F fn(Slot slot) {
  return reinterpret_cast<F>(const_cast<void*>(api[slot]));
}

// An ONNX Runtime status as text ("" for success); releases it.
std::string message(OrtStatus* status) {
  if (status == nullptr) return "";
  std::string text = fn<const char* (*)(const OrtStatus*)>(kGetErrorMessage)(status);
  fn<void (*)(OrtStatus*)>(kReleaseStatus)(status);
  return text.empty() ? "unknown onnxruntime error" : text;
}

void set_error(char* out, size_t size, const std::string& text) {
  if (out == nullptr || size == 0) return;
  std::strncpy(out, text.c_str(), size - 1);
  out[size - 1] = '\0';
}

// One registered engine: its session, names and the input shapes it serves.
struct Engine {
  Session* session = nullptr;
  std::vector<std::string> input_names, output_names;
  std::vector<const char*> input_ptrs, output_ptrs;
  std::vector<int> ranks;        // per input
  std::vector<int64_t> bounds;   // per profile, per input, per dim: min then max
  int profiles = 0;
  std::atomic<int64_t> calls{0};

  ~Engine() {
    if (session != nullptr) fn<void (*)(Session*)>(kReleaseSession)(session);
  }
};

std::mutex registry_mutex;
std::unordered_map<std::string, std::shared_ptr<Engine>>& registry() {
  static auto* engines = new std::unordered_map<std::string, std::shared_ptr<Engine>>();
  return *engines;
}

std::shared_ptr<Engine> find(const std::string& key) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry().find(key);
  return it == registry().end() ? nullptr : it->second;
}


// Whether some profile accepts these input shapes (implicit batch engines register one
// profile: batch 0..their batch, the other dims fixed).
bool accepts(const Engine& engine, const std::vector<tensorflow::TensorShape>& shapes) {
  size_t inputs = engine.ranks.size();
  if (shapes.size() != inputs) return false;
  for (size_t i = 0; i < inputs; ++i) {
    if (shapes[i].dims() != engine.ranks[i]) return false;
  }
  const int64_t* bound = engine.bounds.data();
  for (int p = 0; p < engine.profiles; ++p) {
    bool ok = true;
    for (size_t i = 0; i < inputs; ++i) {
      for (int d = 0; d < engine.ranks[i]; ++d, bound += 2) {
        int64_t size = shapes[i].dim_size(d);
        if (size < bound[0] || size > bound[1]) ok = false;
      }
    }
    if (ok) return true;
  }
  return false;
}

int onnx_type(tensorflow::DataType type) {
  switch (type) {
    case tensorflow::DT_FLOAT: return 1;
    case tensorflow::DT_UINT8: return 2;
    case tensorflow::DT_INT8: return 3;
    case tensorflow::DT_UINT16: return 4;
    case tensorflow::DT_INT16: return 5;
    case tensorflow::DT_INT32: return 6;
    case tensorflow::DT_INT64: return 7;
    case tensorflow::DT_BOOL: return 9;
    case tensorflow::DT_HALF: return 10;
    case tensorflow::DT_DOUBLE: return 11;
    case tensorflow::DT_UINT32: return 12;
    case tensorflow::DT_UINT64: return 13;
    case tensorflow::DT_BFLOAT16: return 16;
    default: return 0;
  }
}

// Releases the OrtValues of one call however it ends.
struct Values {
  std::vector<Value*> items;
  explicit Values(size_t n) : items(n, nullptr) {}
  ~Values() {
    for (Value* v : items) {
      if (v != nullptr) fn<void (*)(Value*)>(kReleaseValue)(v);
    }
  }
};

// One CPU memory arena for every session of this environment (sessions opt in with
// "session.use_env_allocators"): one per session kept each engine's largest run's activations.
// Without it (an error) each session keeps its own, which only costs memory.
void share_one_arena() {
  MemoryInfo* arena = nullptr;
  std::string failed = message(fn<OrtStatus* (*)(int, int, MemoryInfo**)>(kCreateCpuMemoryInfo)(
      1, 0, &arena));  // arena allocator, default memory type
  if (failed.empty()) {
    message(fn<OrtStatus* (*)(Env*, const MemoryInfo*, const void*)>(
        kCreateAndRegisterAllocator)(env, arena, nullptr));  // nullptr: the default arena
  }
  if (arena != nullptr) fn<void (*)(MemoryInfo*)>(kReleaseMemoryInfo)(arena);
}

}  // namespace wb_ort

// --- the ctypes entry points ----------------------------------------------------------------

extern "C" {

// Loads ONNX Runtime from `library` once per process; 0 on success, else the reason in `error`.
int wb_ort_init(const char* library, char* error, size_t error_size) {
  using namespace wb_ort;
  if (api != nullptr) return 0;
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    set_error(error, error_size, std::string("cannot load ") + library + ": " + dlerror());
    return 1;
  }
  auto get_base = reinterpret_cast<const ApiBase* (*)()>(dlsym(handle, "OrtGetApiBase"));
  if (get_base == nullptr) {
    set_error(error, error_size, std::string(library) + " does not export OrtGetApiBase");
    return 1;
  }
  const ApiBase* base = get_base();
  std::string version = base->GetVersionString();
  unsigned major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%u.%u", &major, &minor) != 2 || major != 1 ||
      minor < kMinApiVersion) {
    set_error(error, error_size, "unsupported onnxruntime version " + version);
    return 1;
  }
  const void* const* table = base->GetApi(minor);  // ONNX Runtime 1.N serves API version N
  if (table == nullptr) {
    set_error(error, error_size, "onnxruntime " + version + " refused API version " +
                                     std::to_string(minor));
    return 1;
  }
  api = table;
  // The first entries checked against their documented behaviour before anything else runs.
  OrtStatus* probe = fn<OrtStatus* (*)(int, const char*)>(kCreateStatus)(2, "wb-probe");
  int code = fn<int (*)(const OrtStatus*)>(kGetErrorCode)(probe);
  std::string text = message(probe);
  if (code != 2 || text != "wb-probe") {
    api = nullptr;
    set_error(error, error_size, "onnxruntime " + version + "'s C API table is not the expected one");
    return 1;
  }
  std::string failed = message(fn<OrtStatus* (*)(int, const char*, Env**)>(kCreateEnv)(
      3, "workbench", &env));  // 3: errors only
  if (failed.empty()) {
    failed = message(fn<OrtStatus* (*)(int, int, MemoryInfo**)>(kCreateCpuMemoryInfo)(
        0, 0, &cpu_memory));  // device allocator, default memory type
  }
  if (!failed.empty()) {
    api = nullptr;
    set_error(error, error_size, failed);
    return 1;
  }
  share_one_arena();
  api_version = version;
  return 0;
}

const char* wb_ort_version() { return wb_ort::api_version.c_str(); }

// Makes a session for `key` from an ONNX model file. Inputs: names, ranks; `bounds` holds,
// for each of `profiles` profiles, each input's dims as (min, max). 0 on success, else the
// reason.
int wb_ort_register(const char* key, const char* model_path, int threads,
                    int optimization_level, const char* const* config, int config_count,
                    const char* const* input_names, const int* ranks, int inputs,
                    const char* const* output_names, int outputs, const int64_t* bounds,
                    int profiles, char* error, size_t error_size) {
  using namespace wb_ort;
  if (api == nullptr) {
    set_error(error, error_size, "onnxruntime is not loaded (wb_ort_init)");
    return 1;
  }
  SessionOptions* options = nullptr;
  std::string failed =
      message(fn<OrtStatus* (*)(SessionOptions**)>(kCreateSessionOptions)(&options));
  if (failed.empty())
    failed = message(fn<OrtStatus* (*)(SessionOptions*, int)>(kSetGraphOptimizationLevel)(
        options, optimization_level));
  if (failed.empty())
    failed = message(fn<OrtStatus* (*)(SessionOptions*, int)>(kSetIntraOpNumThreads)(options, threads));
  for (int i = 0; failed.empty() && i < config_count; ++i) {
    failed = message(fn<OrtStatus* (*)(SessionOptions*, const char*, const char*)>(
        kAddSessionConfigEntry)(options, config[2 * i], config[2 * i + 1]));
  }
  auto engine = std::make_shared<Engine>();
  if (failed.empty()) {
    // From the file: ONNX Runtime maps the weights of its external data file.
    failed = message(fn<OrtStatus* (*)(const Env*, const char*, const SessionOptions*,
                                    Session**)>(kCreateSession)(
        env, model_path, options, &engine->session));
  }
  if (options != nullptr) fn<void (*)(SessionOptions*)>(kReleaseSessionOptions)(options);
  if (!failed.empty()) {
    set_error(error, error_size, failed);
    return 1;
  }
  size_t dims = 0;
  for (int i = 0; i < inputs; ++i) {
    engine->input_names.emplace_back(input_names[i]);
    engine->ranks.push_back(ranks[i]);
    dims += ranks[i];
  }
  for (int i = 0; i < outputs; ++i) engine->output_names.emplace_back(output_names[i]);
  for (auto& name : engine->input_names) engine->input_ptrs.push_back(name.c_str());
  for (auto& name : engine->output_names) engine->output_ptrs.push_back(name.c_str());
  engine->bounds.assign(bounds, bounds + 2 * dims * profiles);
  engine->profiles = profiles;
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[key] = engine;
  return 0;
}

// Drops the session of `key` (calls running now finish with it).
void wb_ort_unregister(const char* key) {
  std::lock_guard<std::mutex> lock(wb_ort::registry_mutex);
  wb_ort::registry().erase(key);
}

// The calls `key`'s session served, or -1 when none is registered.
int64_t wb_ort_calls(const char* key) {
  auto engine = wb_ort::find(key);
  return engine == nullptr ? -1 : engine->calls.load();
}

}  // extern "C"

// --- the op -------------------------------------------------------------------------------

namespace tensorflow {

REGISTER_OP("WorkbenchOrtEngine")
    .Input("inputs: Tin")
    .Output("outputs: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("key: string")
    .Attr("engine: string")
    .SetIsStateful()
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->UnknownShape());
      return absl::OkStatus();
    });

class WorkbenchOrtEngineOp : public OpKernel {
 public:
  explicit WorkbenchOrtEngineOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("key", &key_));
    OP_REQUIRES_OK(context, context->GetAttr("engine", &engine_));
  }

  void Compute(OpKernelContext* context) override {
    using namespace wb_ort;
    std::shared_ptr<Engine> engine = find(key_);
    if (engine == nullptr) return Miss(context, "its session is closed");
    int inputs = context->num_inputs();
    std::vector<TensorShape> shapes;
    shapes.reserve(inputs);
    for (int i = 0; i < inputs; ++i) shapes.push_back(context->input(i).shape());
    if (!accepts(*engine, shapes)) return Miss(context, "input shapes outside the engine's");
    Values in(inputs);
    std::vector<int64_t> dims;
    for (int i = 0; i < inputs; ++i) {
      const Tensor& tensor = context->input(i);
      dims.clear();
      for (int d = 0; d < tensor.dims(); ++d) dims.push_back(tensor.dim_size(d));
      // ONNX Runtime reads the input in place and never writes it.
      void* data = const_cast<char*>(tensor.tensor_data().data());
      std::string failed = message(
          fn<OrtStatus* (*)(const MemoryInfo*, void*, size_t, const int64_t*, size_t, int,
                         Value**)>(kCreateTensorWithDataAsOrtValue)(
              cpu_memory, data, tensor.TotalBytes(), dims.data(), dims.size(),
              onnx_type(tensor.dtype()), &in.items[i]));
      if (!failed.empty()) return Miss(context, failed);
    }
    int outputs = context->num_outputs();
    Values out(outputs);
    std::string failed = message(
        fn<OrtStatus* (*)(Session*, const void*, const char* const*, const Value* const*, size_t,
                       const char* const*, size_t, Value**)>(kRun)(
            engine->session, nullptr, engine->input_ptrs.data(), in.items.data(), inputs,
            engine->output_ptrs.data(), outputs, out.items.data()));
    if (!failed.empty()) return Miss(context, failed);
    for (int i = 0; i < outputs; ++i) {
      TypeAndShape* info = nullptr;
      failed = message(fn<OrtStatus* (*)(const Value*, TypeAndShape**)>(kGetTensorTypeAndShape)(
          out.items[i], &info));
      if (!failed.empty()) return Miss(context, failed);
      size_t rank = 0;
      failed = message(
          fn<OrtStatus* (*)(const TypeAndShape*, size_t*)>(kGetDimensionsCount)(info, &rank));
      dims.assign(rank, 0);
      if (failed.empty())
        failed = message(fn<OrtStatus* (*)(const TypeAndShape*, int64_t*, size_t)>(kGetDimensions)(
            info, dims.data(), rank));
      fn<void (*)(TypeAndShape*)>(kReleaseTypeAndShape)(info);
      if (!failed.empty()) return Miss(context, failed);
      TensorShape shape;
      for (int64_t d : dims) shape.AddDim(d);
      Tensor* result = nullptr;
      OP_REQUIRES_OK(context, context->allocate_output(i, shape, &result));
      if (result->TotalBytes() == 0) continue;
      void* source = nullptr;
      failed = message(fn<OrtStatus* (*)(Value*, void**)>(kGetTensorMutableData)(out.items[i],
                                                                              &source));
      if (!failed.empty()) return Miss(context, failed);
      std::memcpy(const_cast<char*>(result->tensor_data().data()), source,
                  result->TotalBytes());
    }
    engine->calls.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  void Miss(OpKernelContext* context, const std::string& why) {
    context->SetStatus(errors::FailedPrecondition("workbench-engine-miss[", engine_, "]: ", why));
  }

  std::string key_, engine_;
};

REGISTER_KERNEL_BUILDER(Name("WorkbenchOrtEngine").Device(DEVICE_CPU), WorkbenchOrtEngineOp);

}  // namespace tensorflow
