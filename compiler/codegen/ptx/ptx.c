/* The GPU backend's driver: builds an NVPTX module of the plan's kernels
 * (the shared emitters of compiler/codegen/llvm/ and this folder's rows and
 * dots), links CUDA's libdevice for the math functions, optimises at O3
 * and prints PTX. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "ptx.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "ptx_internal.h"

#ifndef TFM_LIBDEVICE
#define TFM_LIBDEVICE "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"
#endif

#define TRIPLE "nvptx64-nvidia-cuda"

/* LLVM 14's NVPTX target knows sm_80 (PTX 7.0) but not yet sm_90: PTX for
 * sm_90 is generated for sm_80 and its header raised to what sm_90 needs
 * (PTX 7.8); the instructions used are the same. */
typedef struct Arch {
  const char *name, *llvm_cpu, *features, *ptx_version;
} Arch;
static const Arch ARCHS[] = {
    {"sm_80", "sm_80", "+ptx70", NULL},
    {"sm_90", "sm_80", "+ptx70", "7.8"},
};

static const Arch *find_arch(const char *name) {
  for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
    if (!strcmp(ARCHS[i].name, name ? name : "sm_80"))
      return &ARCHS[i];
  return NULL;
}

int ptx_arch_known(const char *arch) { return find_arch(arch) != NULL; }

void ptx_entry_name(const char *prefix, int function, char *name, size_t size) {
  snprintf(name, size, "%s_k%d", prefix ? prefix : "tfm_model", function);
}

/* The root axes one thread's work spans the rest of. The CPU keeps a loop
 * kernel's last axis as its inner loop (for vectors); on the GPU a kernel
 * without hoisted reductions takes every axis from the thread index instead,
 * so neighbouring threads write neighbouring elements (coalesced) and there
 * are numel threads, not numel / last dimension. A kernel with a hoisted
 * row reduction keeps its rows; the launch then gives each row a warp or a
 * block (ptx_row_sharing), and so does it for each output element of a
 * long root reduction, and an attention kernel a warp to each of its rows. */
static int thread_axes(const KernelPlan *plan, const Kernel *k) {
  if (k->kind == KERNEL_LOOP && k->num_hoisted == 0)
    return graph_node(plan->graph, k->root)->shape.rank;
  return k->outer_axes;
}

/* The work items of kernel `kernel` with every dot one thread an element
 * of C: the launch, but for tiled dots, and the thread plan, which the CPU
 * can run (it cannot run the tiled dot's barriers and mma; the
 * gpu.dot_tile_model test simulates that kernel instead). */
static int64_t thread_items(const KernelPlan *plan, int kernel) {
  const Kernel *k = &plan->kernels[kernel];
  const GraphShape *s = &graph_node(plan->graph, k->root)->shape;
  if (k->kind == KERNEL_DOT)
    return graph_shape_numel(s);
  if (k->kind == KERNEL_SCATTER) { /* (row block, column) pairs (emit_scatter_kernel) */
    int64_t rows = ptx_scatter_block_rows(graph_node(plan->graph, k->root));
    return (s->dims[0] + rows - 1) / rows * s->dims[1];
  }
  int64_t items = 1;
  for (int a = 0; a < thread_axes(plan, k); a++)
    items *= s->dims[a];
  return items;
}

int64_t ptx_work_items(const KernelPlan *plan, int kernel) {
  const Kernel *k = &plan->kernels[kernel];
  const GraphNode *root = graph_node(plan->graph, k->root);
  if (k->kind == KERNEL_DOT && ptx_dot_tiled(root))
    return ptx_dot_tiled_items(root);
  if (ptx_attention_mma(plan->graph, k))
    return ptx_attention_mma_items(plan->graph, k);
  int64_t threads = ptx_row_sharing(plan, kernel);
  return thread_items(plan, kernel) * (threads > 0 ? threads : 1);
}

KernelPlan *ptx_thread_plan(const KernelPlan *plan) {
  KernelPlan *copy = malloc(sizeof *copy);
  Kernel *kernels = malloc(sizeof *kernels * (size_t)(plan->num_kernels + 1));
  if (!copy || !kernels) {
    free(copy);
    free(kernels);
    return NULL;
  }
  *copy = *plan;
  for (int i = 0; i < plan->num_kernels; i++) {
    kernels[i] = plan->kernels[i];
    kernels[i].outer_axes = thread_axes(plan, &plan->kernels[i]);
    kernels[i].rows = thread_items(plan, i);
  }
  copy->kernels = kernels;
  return copy;
}

static void initialize_once(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

static LLVMTargetMachineRef create_machine(const Arch *arch, char *err, size_t size) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, initialize_once);
  LLVMTargetRef target;
  char *message = NULL;
  if (LLVMGetTargetFromTriple(TRIPLE, &target, &message)) {
    gen_fail_llvm(err, size, "NVPTX target", message);
    return NULL;
  }
  LLVMTargetMachineRef machine =
      LLVMCreateTargetMachine(target, TRIPLE, arch->llvm_cpu, arch->features,
                              LLVMCodeGenLevelAggressive, LLVMRelocDefault, LLVMCodeModelDefault);
  if (!machine)
    errbuf_set(err, size, "cannot create an NVPTX target machine for %s", arch->name);
  return machine;
}

/* The special register `name` (llvm.nvvm.read.ptx.sreg.*) as i64. */
LLVMValueRef ptx_shared_array(Gen *gen, const char *name, LLVMTypeRef element, int64_t count,
                              unsigned align) {
  LLVMTypeRef type = LLVMArrayType(element, (unsigned)count);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(gen->module, type, name, 3);
  LLVMSetInitializer(g, LLVMGetUndef(type));
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, align);
  return g;
}

LLVMValueRef ptx_shared_element(Gen *gen, LLVMValueRef array, LLVMValueRef i) {
  LLVMValueRef index[2] = {gen_i64(gen, 0), i};
  return LLVMBuildInBoundsGEP2(gen->builder, LLVMGlobalGetValueType(array), array, index, 2, "");
}

static LLVMValueRef special_register(Gen *gen, const char *name) {
  char full[64];
  snprintf(full, sizeof full, "llvm.nvvm.read.ptx.sreg.%s", name);
  return LLVMBuildZExt(gen->builder, gen_intrinsic(gen, full, NULL, 0, NULL, 0), gen->i64, "");
}

static void mark_kernel(Gen *gen, LLVMValueRef fn) {
  LLVMValueRef operands[3] = {fn, LLVMMDStringInContext(gen->context, "kernel", 6),
                              gen_i32(gen, 1)};
  LLVMAddNamedMetadataOperand(gen->module, "nvvm.annotations",
                              LLVMMDNodeInContext(gen->context, operands, 3));
}

/* The entry of plan function f: thread `item` runs the range function over
 * [item, item + 1) with the pointer parameters as its argument array. */
static LLVMValueRef emit_entry(Gen *gen, int f) {
  const Kernel *k = &gen->plan->kernels[gen->plan->function_kernel[f]];
  LLVMBuilderRef b = gen->builder;
  LLVMTypeRef params[KERNEL_MAX_ARGS_PTX + 1];
  int n = k->num_args;
  for (int i = 0; i < n; i++)
    params[i] = gen->ptr;
  params[n] = gen->i64;
  char name[160];
  ptx_entry_name(gen->prefix, f, name, sizeof name);
  LLVMValueRef fn =
      LLVMAddFunction(gen->module, name, LLVMFunctionType(gen->void_type, params, (unsigned)n + 1, false));
  mark_kernel(gen, fn);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(gen->context, fn, "entry");
  LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(gen->context, fn, "run");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(gen->context, fn, "done");
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef item = LLVMBuildAdd(
      b, LLVMBuildMul(b, special_register(gen, "ctaid.x"), special_register(gen, "ntid.x"), ""),
      special_register(gen, "tid.x"), "item");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, item, LLVMGetParam(fn, (unsigned)n), ""), run,
                  done);
  LLVMPositionBuilderAtEnd(b, run);
  LLVMValueRef slots = LLVMBuildArrayAlloca(b, gen->ptr, gen_i64(gen, n), "args");
  for (int i = 0; i < n; i++)
    LLVMBuildStore(b, LLVMGetParam(fn, (unsigned)i), gen_element(gen, gen->ptr, slots, gen_i64(gen, i)));
  LLVMValueRef call[3] = {LLVMBuildBitCast(b, slots, gen->ptr, ""), item,
                          LLVMBuildAdd(b, item, gen_i64(gen, 1), "")};
  LLVMBuildCall2(b, gen->range_fn, gen->functions[f], call, 3, "");
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
  return fn;
}

/* The CPU emitters mark kernels noinline (for P_run); here the entry must
 * absorb them, so the attribute goes. */
static void allow_inlining(Gen *gen, LLVMValueRef fn) {
  unsigned kind = LLVMGetEnumAttributeKindForName("noinline", 8);
  LLVMRemoveEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, kind);
  kind = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(gen->context, kind, 0));
}

/* The kernel of plan function f as the GPU runs it. */
static void emit_kernel(Gen *gen, int f, const Kernel *k) {
  const KernelPlan *plan = gen->plan;
  int64_t threads;
  if (k->kind == KERNEL_DOT)
    ptx_emit_dot_kernel(gen, f, k);
  else if (k->kind == KERNEL_SCATTER)
    emit_scatter_kernel(gen, f, k, ptx_scatter_block_rows(graph_node(plan->graph, k->root)));
  else if (ptx_attention_mma(plan->graph, k))
    ptx_emit_attention_mma(gen, f, k);
  else if (k->kind == KERNEL_ATTENTION)
    ptx_emit_attention_kernel(gen, f, k);
  else if ((threads = ptx_row_split_threads(plan, plan->function_kernel[f])) > 0)
    ptx_emit_row_kernel(gen, f, k, threads);
  else
    emit_loop_kernel(gen, f, k);
}

/* The NVPTX module's kernels; their entries are added by generate. */
static const Target device_target = {.name = "cuda",
                                     .emit_kernel = emit_kernel,
                                     .inline_f32_math = true,
                                     .lane_reductions = true,
                                     .noalias_body = false};

/* With cublas, the dots cuBLAS computes get neither a function nor an
 * entry (gen->functions[f] and entries[f] stay NULL). */
static bool generate(Gen *gen, LLVMValueRef *entries, bool cublas) {
  const KernelPlan *plan = gen->plan;
  for (int f = 0; f < plan->num_functions; f++) {
    const Kernel *k = &plan->kernels[plan->function_kernel[f]];
    int64_t desc[PTX_GEMM_FIELDS];
    if (cublas && ptx_dot_on_cublas(plan, plan->function_kernel[f], desc))
      continue;
    if (k->num_args > KERNEL_MAX_ARGS_PTX)
      return false;
    gen->target->emit_kernel(gen, f, k);
    allow_inlining(gen, gen->functions[f]);
  }
  for (int f = 0; f < plan->num_functions; f++)
    if (gen->functions[f])
      entries[f] = emit_entry(gen, f);
  return true;
}

/* Math calls (expf, tanh, ...) become libdevice's __nv_ functions, whose
 * module is linked in; a plan without math needs no libdevice. */
static bool link_libdevice(LLVMModuleRef module, LLVMContextRef context, char *err, size_t size) {
  bool needed = false;
  for (LLVMValueRef fn = LLVMGetFirstFunction(module); fn; fn = LLVMGetNextFunction(fn)) {
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);
    if (!LLVMIsDeclaration(fn) || !strncmp(name, "llvm.", 5))
      continue;
    char renamed[80];
    snprintf(renamed, sizeof renamed, "__nv_%s", name);
    LLVMSetValueName2(fn, renamed, strlen(renamed));
    needed = true;
  }
  if (!needed)
    return true;
  const char *path = getenv("TFM_LIBDEVICE");
  if (!path || !*path)
    path = TFM_LIBDEVICE;
  LLVMMemoryBufferRef buffer;
  char *message = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buffer, &message))
    return gen_fail_llvm(err, size, "cannot read CUDA's libdevice (set TFM_LIBDEVICE)", message);
  LLVMModuleRef library;
  bool failed = LLVMParseBitcodeInContext2(context, buffer, &library);
  LLVMDisposeMemoryBuffer(buffer);
  if (failed)
    return errbuf_set(err, size, "%s: not LLVM bitcode this LLVM reads", path);
  LLVMSetTarget(library, TRIPLE);
  LLVMSetDataLayout(library, LLVMGetDataLayoutStr(module));
  if (LLVMLinkModules2(module, library))
    return errbuf_set(err, size, "cannot link %s", path);
  /* ftz off: denormals are kept, as on the CPU. */
  LLVMAddModuleFlag(module, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                    LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(context), 0, false)));
  return true;
}

/* Only the entries stay visible, so O3 drops unused libdevice code. */
static void internalize(LLVMModuleRef module, LLVMValueRef *entries, int num_entries) {
  for (LLVMValueRef fn = LLVMGetFirstFunction(module); fn; fn = LLVMGetNextFunction(fn)) {
    if (LLVMIsDeclaration(fn))
      continue;
    bool entry = false;
    for (int i = 0; i < num_entries; i++)
      entry |= entries[i] == fn;
    if (!entry)
      LLVMSetLinkage(fn, LLVMInternalLinkage);
  }
}

/* The PTX header raised for an architecture LLVM 14 does not name. */
static char *retarget(char *ptx, const Arch *arch) {
  if (!arch->ptx_version)
    return ptx;
  size_t len = strlen(ptx);
  char *out = malloc(len + 64);
  if (!out) {
    free(ptx);
    return NULL;
  }
  size_t o = 0;
  for (const char *line = ptx; *line;) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
    if (!strncmp(line, ".version ", 9))
      o += (size_t)sprintf(out + o, ".version %s\n", arch->ptx_version);
    else if (!strncmp(line, ".target ", 8))
      o += (size_t)sprintf(out + o, ".target %s\n", arch->name);
    else
      memcpy(out + o, line, n), o += n;
    line += n;
  }
  out[o] = '\0';
  free(ptx);
  return out;
}

void ptx_thread_plan_free(KernelPlan *plan) {
  if (plan)
    free(plan->kernels);
  free(plan);
}

char *ptx_compile(const KernelPlan *cpu_plan, const PtxOptions *options, char *err,
                  size_t err_size) {
  const Arch *arch = find_arch(options ? options->arch : NULL);
  if (!arch) {
    errbuf_set(err, err_size, "unknown GPU architecture '%s' (sm_80, sm_90)", options->arch);
    return NULL;
  }
  LLVMTargetMachineRef machine = create_machine(arch, err, err_size);
  if (!machine)
    return NULL;
  KernelPlan *plan = ptx_thread_plan(cpu_plan);
  if (!plan) {
    LLVMDisposeTargetMachine(machine);
    errbuf_set(err, err_size, "out of memory");
    return NULL;
  }
  const char *prefix = options && options->prefix ? options->prefix : "tfm_model";
  LLVMContextRef context = LLVMContextCreate();
  LLVMModuleRef module = LLVMModuleCreateWithNameInContext(prefix, context);
  LLVMSetTarget(module, TRIPLE);
  LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(machine);
  LLVMSetModuleDataLayout(module, layout);
  LLVMDisposeTargetData(layout);
  Gen gen = {.context = context, .module = module, .plan = plan, .graph = plan->graph,
             .prefix = prefix, .target = &device_target};
  gen.builder = LLVMCreateBuilderInContext(context);
  gen_init_types(&gen);
  LLVMValueRef *entries = calloc((size_t)plan->num_functions + 1, sizeof(LLVMValueRef));
  bool ok = gen_alloc_tables(&gen) && entries;
  if (!ok)
    errbuf_set(err, err_size, "out of memory");
  else if (!(ok = generate(&gen, entries, options && options->cublas)))
    errbuf_set(err, err_size, "a kernel has more than %d buffers", KERNEL_MAX_ARGS_PTX);
  LLVMDisposeBuilder(gen.builder);
  char *text = NULL;
  ok = ok && gen_verify(module, err, err_size) && link_libdevice(module, context, err, err_size);
  if (ok) {
    internalize(module, entries, plan->num_functions);
    ok = gen_optimize(module, machine, err, err_size);
  }
  if (ok && (text = gen_machine_text(machine, module, "PTX", err, err_size)))
    text = retarget(text, arch);
  gen_free_tables(&gen);
  free(entries);
  LLVMDisposeModule(module);
  LLVMContextDispose(context);
  LLVMDisposeTargetMachine(machine);
  ptx_thread_plan_free(plan);
  return text;
}
