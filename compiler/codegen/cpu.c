/* The CPU backend's driver: builds the module of a plan, verifies it,
 * optimises it with the new pass manager and emits object code or text for
 * the host CPU or a named one. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "cpu.h"
#include "errbuf.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

struct CpuModule {
  LLVMContextRef context;
  LLVMModuleRef module;
  LLVMTargetMachineRef machine;
};

LLVMModuleRef cpu_module_llvm(CpuModule *module, LLVMContextRef *context) {
  *context = module->context;
  return module->module;
}


/* Takes an LLVM message into err and disposes of it. */
static bool fail_llvm(char *err, size_t size, const char *what, char *message) {
  errbuf_set(err, size, "%s: %s", what, message ? message : "unknown error");
  LLVMDisposeMessage(message);
  return false;
}

bool cpu_initialize(void) {
  return !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter();
}

static LLVMTargetMachineRef create_machine(const char *cpu, char *err, size_t size) {
  if (!cpu_initialize()) {
    errbuf_set(err, size, "LLVM has no native target");
    return NULL;
  }
  char *triple = LLVMGetDefaultTargetTriple();
  LLVMTargetRef target;
  char *message = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &message)) {
    LLVMDisposeMessage(triple);
    fail_llvm(err, size, "target", message);
    return NULL;
  }
  bool native = !cpu || strcmp(cpu, "native") == 0;
  char *host_cpu = native ? LLVMGetHostCPUName() : NULL;
  char *features = native ? LLVMGetHostCPUFeatures() : NULL;
  LLVMTargetMachineRef machine =
      LLVMCreateTargetMachine(target, triple, native ? host_cpu : cpu, native ? features : "",
                              LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMDisposeMessage(triple);
  LLVMDisposeMessage(host_cpu);
  LLVMDisposeMessage(features);
  if (!machine)
    errbuf_set(err, size, "cannot create a target machine for cpu '%s'", cpu);
  return machine;
}

/* Whether the target has AVX-512: the host's features for "native"; for a
 * named CPU LLVM's C API cannot say, so a list of LLVM 14's AVX-512 CPUs. */
static int vector_bits(const char *cpu) {
  if (!cpu || strcmp(cpu, "native") == 0) {
    char *features = LLVMGetHostCPUFeatures();
    bool avx512 = features && strstr(features, "+avx512f");
    LLVMDisposeMessage(features);
    return avx512 ? 512 : 256;
  }
  static const char *const avx512_cpus[] = {
      "x86-64-v4",      "knl",           "knm",       "skylake-avx512", "skx",
      "cascadelake",    "cooperlake",    "cannonlake", "icelake-client", "icelake-server",
      "rocketlake",     "tigerlake",     "sapphirerapids", "znver4"};
  for (size_t i = 0; i < sizeof avx512_cpus / sizeof *avx512_cpus; i++)
    if (strcmp(cpu, avx512_cpus[i]) == 0)
      return 512;
  return 256;
}

void cpu_init_types(CpuGen *gen) {
  LLVMContextRef c = gen->context;
  gen->i1 = LLVMInt1TypeInContext(c);
  gen->i8 = LLVMInt8TypeInContext(c);
  gen->i16 = LLVMInt16TypeInContext(c);
  gen->i32 = LLVMInt32TypeInContext(c);
  gen->i64 = LLVMInt64TypeInContext(c);
  gen->f32 = LLVMFloatTypeInContext(c);
  gen->f64 = LLVMDoubleTypeInContext(c);
  gen->void_type = LLVMVoidTypeInContext(c);
  gen->ptr = LLVMPointerType(gen->i8, 0);
  LLVMTypeRef params[3] = {gen->ptr, gen->i64, gen->i64};
  gen->range_fn = LLVMFunctionType(gen->void_type, params, 3, false);
}

static bool generate(CpuGen *gen) {
  const KernelPlan *plan = gen->plan;
  int count = graph_count(gen->graph);
  gen->functions = calloc((size_t)(plan->num_functions + 1), sizeof(LLVMValueRef));
  gen->constant_data = calloc((size_t)(count + 1), sizeof(LLVMValueRef));
  if (!gen->functions || !gen->constant_data)
    return false;
  if (gen->gpu_ptx) { /* the host side of a CUDA build: no kernels here */
    gpu_emit_host_entry(gen, gen->gpu_ptx);
    return true;
  }
  for (int f = 0; f < plan->num_functions; f++) {
    const Kernel *k = &plan->kernels[plan->function_kernel[f]];
    if (k->kind == KERNEL_DOT && gen->gpu_threads)
      ptx_emit_dot_kernel(gen, f, k);
    else if (k->kind == KERNEL_DOT)
      cpu_emit_dot_kernel(gen, f, k);
    else if (k->kind == KERNEL_SCATTER)
      cpu_emit_scatter_kernel(gen, f, k,
                              gen->gpu_threads
                                  ? ptx_scatter_block_rows(graph_node(plan->graph, k->root))
                                  : 0);
    else if (k->kind == KERNEL_ATTENTION)
      cpu_emit_attention_kernel(gen, f, k, NULL);
    else if (!gen->gpu_threads || !ptx_emit_row_kernel_serial(gen, f, k))
      cpu_emit_loop_kernel(gen, f, k);
  }
  cpu_emit_entry(gen);
  return true;
}

CpuModule *cpu_compile(const KernelPlan *plan, const CpuOptions *options, char *err,
                       size_t err_size) {
  CpuModule *m = calloc(1, sizeof *m);
  if (!m) {
    errbuf_set(err, err_size, "out of memory");
    return NULL;
  }
  if (!(m->machine = create_machine(options ? options->cpu : NULL, err, err_size))) {
    free(m);
    return NULL;
  }
  const char *prefix = options && options->prefix ? options->prefix : "tfm_model";
  m->context = LLVMContextCreate();
  m->module = LLVMModuleCreateWithNameInContext(prefix, m->context);
  char *triple = LLVMGetTargetMachineTriple(m->machine);
  LLVMSetTarget(m->module, triple);
  LLVMDisposeMessage(triple);
  LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(m->machine);
  LLVMSetModuleDataLayout(m->module, layout);
  LLVMDisposeTargetData(layout);

  CpuGen gen = {.context = m->context,
                .module = m->module,
                .plan = plan,
                .graph = plan->graph,
                .prefix = prefix,
                .vector_bits = vector_bits(options ? options->cpu : NULL),
                .gpu_ptx = options ? options->gpu_ptx : NULL,
                .gpu_cublas = options && options->gpu_cublas,
                .gpu_threads = options && options->gpu_threads};
  gen.builder = LLVMCreateBuilderInContext(m->context);
  cpu_init_types(&gen);
  bool ok = generate(&gen);
  LLVMDisposeBuilder(gen.builder);
  free(gen.functions);
  free(gen.constant_data);
  char *message = NULL;
  if (!ok) {
    errbuf_set(err, err_size, "code generation: out of memory");
  } else if (LLVMVerifyModule(m->module, LLVMReturnStatusAction, &message)) {
    ok = fail_llvm(err, err_size, "invalid LLVM module", message);
  } else {
    LLVMDisposeMessage(message);
    LLVMPassBuilderOptionsRef passes = LLVMCreatePassBuilderOptions();
    LLVMErrorRef error = LLVMRunPasses(m->module, "default<O3>", m->machine, passes);
    LLVMDisposePassBuilderOptions(passes);
    if (error)
      ok = fail_llvm(err, err_size, "optimisation", LLVMGetErrorMessage(error));
  }
  if (!ok) {
    cpu_module_free(m);
    return NULL;
  }
  return m;
}

void cpu_module_free(CpuModule *m) {
  if (!m)
    return;
  if (m->module)
    LLVMDisposeModule(m->module);
  if (m->context)
    LLVMContextDispose(m->context);
  if (m->machine)
    LLVMDisposeTargetMachine(m->machine);
  free(m);
}

bool cpu_emit_object(CpuModule *m, const char *path, char *err, size_t err_size) {
  char *message = NULL;
  char *file = strdup(path); /* the C API takes a non-const name */
  if (!file)
    return errbuf_set(err, err_size, "out of memory");
  bool failed = LLVMTargetMachineEmitToFile(m->machine, m->module, file, LLVMObjectFile, &message);
  free(file);
  if (failed)
    return fail_llvm(err, err_size, path, message);
  return true;
}

char *cpu_llvm_text(CpuModule *m) {
  char *text = LLVMPrintModuleToString(m->module);
  char *copy = strdup(text);
  LLVMDisposeMessage(text);
  return copy;
}

char *cpu_assembly_text(CpuModule *m, char *err, size_t err_size) {
  char *message = NULL;
  LLVMMemoryBufferRef buffer;
  if (LLVMTargetMachineEmitToMemoryBuffer(m->machine, m->module, LLVMAssemblyFile, &message,
                                          &buffer)) {
    fail_llvm(err, err_size, "assembly", message);
    return NULL;
  }
  size_t size = LLVMGetBufferSize(buffer);
  char *text = malloc(size + 1);
  if (text) {
    memcpy(text, LLVMGetBufferStart(buffer), size);
    text[size] = '\0';
  } else {
    errbuf_set(err, err_size, "out of memory");
  }
  LLVMDisposeMemoryBuffer(buffer);
  return text;
}
