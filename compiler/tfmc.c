/* tfmc: the tfm compiler's command line. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "cpu.h"
#include "diag.h"
#include "emit_dot.h"
#include "graph_text.h"
#include "kernel.h"
#include "lower.h"
#include "lower_model.h"
#include "pass.h"
#include "ptx.h"
#include "ptx_report.h"
#include "sema.h"
#include "server.h"
#include "stats.h"

static const char usage_text[] =
    "usage: tfmc COMMAND FILE.tfm [options]\n"
    "\n"
    "commands:\n"
    "  build FILE -o OUT  compile the model into an executable that trains and runs it\n"
    "                  (OUT --help lists its commands: train, eval, translate, generate)\n"
    "  check FILE      parse and check the model; print a one-screen summary\n"
    "  stats FILE      parameters per layer and in total, with shapes; then per step of the\n"
    "                  forward and training graphs: kernels, FLOPs and planned memory\n"
    "  emit ast FILE   print the checked syntax tree\n"
    "  emit graph FILE print the graph IR as text, one node per line (--train: the\n"
    "                  training graph: forward, backward and optimizer update)\n"
    "  emit dot FILE   the same graph as Graphviz DOT (--layers, --fused, --svg)\n"
    "  emit kernels FILE  the kernels of that graph: fused nodes, buffers, offsets\n"
    "  emit llvm FILE  the optimised LLVM IR of those kernels (--cpu as for build)\n"
    "  emit asm FILE   their assembly\n"
    "  emit ptx FILE   the PTX of those kernels for NVIDIA GPUs (--gpu-arch)\n"
    "  lsp             a language server on stdin/stdout for editors (docs/editors.md):\n"
    "                  diagnostics, hover with shapes, definitions, symbols, completion;\n"
    "                  -D, --variant and -I apply to every file it checks\n"
    "\n"
    "options:\n"
    "  -D NAME=VALUE   override a config value (repeatable; -DNAME=VALUE works too)\n"
    "  --variant NAME  apply a named variant block before the -D overrides\n"
    "  -I DIR          also look for imports in DIR (after the file's own folder)\n"
      "  --train         emit graph|dot|kernels|llvm|asm|ptx: the training graph instead\n"
    "                  of the forward one\n"
    "  --pretrained NAME  emit graph|dot: the graph of the model's 'pretrained NAME'\n"
    "                  block (inputs: the checkpoint's tensors; outputs: the params)\n"
    "  --decode        emit graph|dot|kernels|llvm|asm|ptx: the decode-step graph of a\n"
    "                  language model (one new token per row at input pos, key/value\n"
    "                  caches as state; docs/language.md, \"Decoding\")\n"
    "  --no-opt        emit graph|dot|kernels|llvm|asm|ptx: the graph as lowered, before\n"
    "                  folding, simplification, CSE and dead-code elimination\n"
    "  --layers        emit dot: a box per layer instance (encoder.3.attn), nested\n"
    "                  as the instances are; a layer's backward and update nodes\n"
    "                  sit in its box, the model's own code and the optimizer's\n"
    "                  shared steps outside\n"
    "  --fused         emit dot: the graph as the kernels are formed from it (after\n"
    "                  recomputation, so node numbers differ from emit graph's), each\n"
    "                  fused kernel's nodes in one colour and labelled 'kernel N',\n"
    "                  the nodes it stores with a thick border (--target cuda: the\n"
    "                  GPU's kernels)\n"
    "  --svg FILE      emit dot: render with Graphviz's dot into FILE (SVG) instead of\n"
    "                  writing DOT to standard output\n"
    "  --no-fuse-attention  keep attention as primitives (no fused attention ops;\n"
    "                  training then stores the [.., T, S] probabilities)\n"
    "  -o FILE         build: the executable to write\n"
    "  --cpu CPU       build, emit llvm|asm: native (default: this machine's CPU),\n"
    "                  an LLVM CPU name such as x86-64-v3 for a portable binary, or\n"
    "                  (build) generic-dispatch: one binary holding the code for\n"
    "                  AVX2, AVX-512 and AMX CPUs, choosing at start-up (the\n"
    "                  environment's TFM_CPU_VARIANT=avx2|avx512|amx forces one)\n"
    "  -v              build: report the time taken\n"
    "  --data-parallel build: also compile the train step as gradients + their\n"
    "                  application, so that `mpirun -np N BINARY train` trains\n"
    "                  data-parallel (README: Training on several processes);\n"
    "                  and each param's update as a graph of its own, for train\n"
    "                  --zero 1 (optimizer-state sharding)\n"
    "  --target T      build, emit kernels|dot: cpu (default) or cuda (NVIDIA GPUs: PTX\n"
    "                  kernels launched through the CUDA driver, loaded at run time;\n"
    "                  emit kernels adds each kernel's registers and spills)\n"
    "  --gpu-arch A    build --target cuda, emit ptx|kernels: sm_80 (default) or sm_90\n"
    "  --gemm=G        build --target cuda, emit ptx: generated (default: contractions\n"
    "                  as PTX kernels) or cublas (f32 contractions call cuBLAS's\n"
    "                  cublasSgemmStridedBatched, loaded at run time; emit ptx leaves\n"
    "                  them out)\n"
    "  --dtype D       build, stats, emit graph|dot|kernels|llvm|asm|ptx: f32 (default)\n"
    "                  or bf16: activations of the forward and backward graphs stored\n"
    "                  in bf16 (2 bytes) and computed in f32, every dot and reduction\n"
    "                  accumulated in f32; parameters, optimizer state, the loss, the\n"
    "                  updates and outputs stay f32 (so do checkpoints); no loss scaling\n"
    "  --shared        build: a shared library (the runtime inside) plus a C header\n"
    "                  for embedding, instead of an executable\n"
    "  --header FILE   build --shared: the header's path (default: OUT with .h\n"
    "                  in place of .so)\n"
    "  -h, --help      show this help\n"
    "  --version       show the version\n"
    "\n"
    "Exit status: 0 on success, 1 when the program has errors, 2 on bad usage.\n";

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "tfmc: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nrun 'tfmc --help' for usage\n");
  return 2;
}

/* 63082496 -> "63,082,496" */
static const char *grouped(int64_t n) {
  static char bufs[4][32];
  static int which;
  char *out = bufs[which++ & 3];
  char digits[32];
  int len = snprintf(digits, sizeof digits, "%" PRId64, n < 0 ? -n : n);
  int k = 0;
  if (n < 0) out[k++] = '-';
  for (int i = 0; i < len; i++) {
    out[k++] = digits[i];
    if ((len - i - 1) % 3 == 0 && i != len - 1) out[k++] = ',';
  }
  out[k] = 0;
  return out;
}

/* A float always shows as one (0.0, not 0), so it reads apart from an int. */
static const char *float_text(double f) {
  const char *s = pool_printf("%g", f);
  return strpbrk(s, ".eni") ? s : pool_printf("%s.0", s);
}

static const char *value_text(const Value *v) {
  switch (v->kind) {
    case V_INT: return pool_printf("%" PRId64, v->i);
    case V_FLOAT: return float_text(v->f);
    case V_BOOL: return v->i ? "true" : "false";
    case V_STR: return pool_printf("\"%s\"", v->s);
    default: return value_kind_name(v);
  }
}

static const char *node_source(const Node *n) {
  size_t len;
  const char *line = source_line(n->span.file, n->span.line, &len);
  if (n->span.line != n->span.end_line || (size_t)n->span.end_col > len)
    return pool_printf("(expression at %s)", span_str(n->span));
  return pool_printf("%.*s", n->span.end_col - n->span.col + 1, line + n->span.col - 1);
}

static void print_io(const char *title, const PtrVec *list) {
  printf("%s:\n", title);
  for (int i = 0; i < list->len; i++) {
    const ModelIO *io = list->items[i];
    printf("  %-16s %s\n", io->name, tensor_type_str(&io->type));
  }
}

static void print_summary(const CheckedModel *m) {
  const SourceFile *f = source_get(m->at.file);
  printf("model %s (%s)%s%s\n", m->name, f ? f->path : "?", m->variant ? ", variant " : "",
         m->variant ? m->variant : "");
  printf("config:\n");
  for (int i = 0; i < m->config.len; i++) {
    const ConfigEntry *e = m->config.items[i];
    printf("  %-16s = %s%s%s\n", e->name, value_text(e->value), e->override ? "   # " : "",
           e->override ? e->override : "");
  }
  print_io("inputs", &m->inputs);
  print_io("outputs", &m->outputs);
  printf("parameters: %s in %d tensors\n", grouped(model_param_count(m)), m->params.len);
  if (m->train.present) {
    const Value *o = m->train.optimizer;
    printf("train: %s(", o->s);
    for (int i = 0; i < o->keys.len; i++)
      printf("%s%s = %s", i ? ", " : "", (char *)o->keys.items[i],
             float_text(((Value *)o->items.items[i])->f));
    printf("), lr = %s", node_source(m->train.lr_expr));
    if (m->train.clip > 0) printf(", clip = %s", float_text(m->train.clip));
    printf("\n");
  }
}

static void print_instance(const Instance *inst, int depth) {
  if (inst->path[0])
    printf("%*s%-*s %18s %14s\n", depth * 2, "", 48 - depth * 2,
           pool_printf("%s (%s)", inst->path, inst->def ? inst->def->name : "?"), "",
           grouped(instance_param_count(inst)));
  for (int i = 0; i < inst->params.len; i++) {
    const Param *p = inst->params.items[i];
    const char *shape = tensor_type_str(&p->type);
    printf("%*s%-*s %18s %14s\n", (depth + 1) * 2, "", 48 - (depth + 1) * 2, p->name, shape,
           grouped(tensor_numel(&p->type)));
  }
  for (int i = 0; i < inst->children.len; i++) print_instance(inst->children.items[i], depth + 1);
}

static void print_stats(const CheckedModel *m) {
  printf("parameters of model %s\n", m->name);
  printf("%-50s %18s %14s\n", "name", "shape", "count");
  print_instance(m->root, -1);
  printf("%-50s %18s %14s\n", "total", "", grouped(model_param_count(m)));
}

/* The standard pass pipeline; frees g. */
static Graph *optimize_graph(Graph *g) {
  char err[256];
  Graph *out = pass_standard(g, err, sizeof err);
  if (!out) fprintf(stderr, "tfmc: internal error: graph pass failed: %s\n", err);
  graph_free(g);
  return out;
}

/* LLVM aborts on a CPU name it does not know, so --cpu is checked first. */
static int known_cpu(const char *cpu) {
  static const char *const cpus[] = {"native", "generic-dispatch", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4",
                                     "haswell", "broadwell", "skylake", "skylake-avx512",
                                     "cascadelake", "icelake-server", "sapphirerapids",
                                     "znver1", "znver2", "znver3"};
  for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++)
    if (!strcmp(cpus[i], cpu)) return 1;
  return 0;
}

/* emit kernels | llvm | asm | ptx: the graph planned into kernels and
 * compiled. PTX is always the plan a --target cuda build runs (the CPU's
 * plan merges what the GPU's keeps apart: attention backward, column sums,
 * update values). */
static int emit_code(const Graph *g, int form, const char *cpu, const BuildOptions *build) {
  char err[512];
  /* emit ptx is the GPU's plan, with or without --target cuda */
  bool gpu = build->cuda || form == 6;
  KernelPlanOptions plan_options = gpu ? ptx_plan_options() : cpu_plan_options();
  Graph *recomputed = kernel_prepare(g, &plan_options, NULL, err, sizeof err);
  KernelPlan *plan = recomputed ? kernel_plan_build(recomputed, &plan_options, err, sizeof err) : NULL;
  if (!plan) {
    fprintf(stderr, "tfmc: internal error: planning: %s\n", err);
    graph_free(recomputed);
    return 1;
  }
  int status = 0;
  if (form == 3) {
    kernel_plan_print(plan, stdout);
    if (build->cuda && ptx_report_resources(plan, build->gpu_arch, stdout, err, sizeof err))
      fprintf(stderr, "tfmc: %s\n", err), status = 1;
  } else if (form == 6) {
    char *ptx = ptx_compile(plan, &(PtxOptions){.arch = build->gpu_arch, .cublas = build->cublas},
                            err, sizeof err);
    if (ptx) fputs(ptx, stdout);
    else fprintf(stderr, "tfmc: PTX generation: %s\n", err), status = 1;
    free(ptx);
  } else {
    CpuOptions o = {.cpu = cpu};
    CpuModule *m = cpu_compile(plan, &o, err, sizeof err);
    char *text = !m ? NULL : form == 4 ? cpu_llvm_text(m) : cpu_assembly_text(m, err, sizeof err);
    if (text) fputs(text, stdout);
    else fprintf(stderr, "tfmc: code generation: %s\n", err), status = 1;
    free(text);
    cpu_module_free(m);
  }
  kernel_plan_free(plan);
  graph_free(recomputed);
  return status;
}

/* Whether argument a is option `name`, given as `name VALUE` (which takes
 * the next argument, advancing *i) or `name=VALUE`; *value is the value,
 * NULL when the next argument is missing. */
static bool valued_option(const char *a, const char *name, int argc, char **argv, int *i,
                          const char **value) {
  size_t n = strlen(name);
  if (strncmp(a, name, n) || (a[n] && a[n] != '='))
    return false;
  *value = a[n] ? a + n + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
  return true;
}

int main(int argc, char **argv) {
  FrontOptions opt = {.training = 1};
  const char *command = NULL, *what = NULL;
  int train = 0, decode = 0, optimize = 1, dtype_given = 0;
  BuildOptions build = {.cpu = "native"};
  EmitDotOptions dot = {0};
  const char *pretrained = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_text, stdout);
      return 0;
    }
    if (!strcmp(a, "--version")) {
      printf("tfmc %s\n", TFM_VERSION);
      return 0;
    }
    if (!strcmp(a, "--train")) {
      train = 1;
    } else if (!strcmp(a, "--decode")) {
      decode = 1;
    } else if (!strcmp(a, "--no-opt")) {
      optimize = 0;
    } else if (valued_option(a, "--pretrained", argc, argv, &i, &v)) {
      if (!v || !*v) return usage_error("%s needs the block's name", "--pretrained");
      pretrained = v;
    } else if (!strcmp(a, "--layers")) {
      dot.layers = true;
    } else if (!strcmp(a, "--fused")) {
      dot.fused = true;
    } else if (valued_option(a, "--svg", argc, argv, &i, &v)) {
      if (!v || !*v) return usage_error("%s needs a file name", "--svg");
      dot.svg = v;
    } else if (!strcmp(a, "--no-fuse-attention")) {
      opt.unfused_attention = 1;
    } else if (!strcmp(a, "-v")) {
      build.verbose = 1;
    } else if (!strcmp(a, "--shared")) {
      build.shared = 1;
    } else if (!strcmp(a, "--data-parallel")) {
      build.data_parallel = 1;
    } else if (!strcmp(a, "--header")) {
      if (i + 1 >= argc) return usage_error("%s needs an argument", a);
      build.header = argv[++i];
    } else if (!strcmp(a, "--target") || !strcmp(a, "--gpu-arch")) {
      if (i + 1 >= argc) return usage_error("%s needs an argument", a);
      v = argv[++i];
      if (a[2] == 'g') {
        if (!ptx_arch_known(v)) return usage_error("--gpu-arch: unknown '%s' (sm_80, sm_90)", v);
        build.gpu_arch = v;
      } else if (!strcmp(v, "cuda") || !strcmp(v, "cpu")) {
        build.cuda = v[1] == 'u';
      } else {
        return usage_error("--target: unknown '%s' (cpu, cuda)", v);
      }
    } else if (valued_option(a, "--dtype", argc, argv, &i, &v)) {
      if (!v) return usage_error("%s needs an argument", a);
      if (strcmp(v, "f32") && strcmp(v, "bf16"))
        return usage_error("--dtype: unknown '%s' (f32, bf16)", v);
      opt.bf16 = v[0] == 'b';
      dtype_given = 1;
    } else if (valued_option(a, "--gemm", argc, argv, &i, &v)) {
      if (!v) return usage_error("%s needs an argument", a);
      if (strcmp(v, "generated") && strcmp(v, "cublas"))
        return usage_error("--gemm: unknown '%s' (generated, cublas)", v);
      build.cublas = v[0] == 'c';
    } else if (!strcmp(a, "-o") || !strcmp(a, "--cpu")) {
      if (i + 1 >= argc) return usage_error("%s needs an argument", a);
      if (a[1] == 'o') build.output = argv[++i];
      else build.cpu = argv[++i];
    } else if (!strncmp(a, "-D", 2)) {
      const char *d = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
      if (!d) return usage_error("%s needs NAME=VALUE", a);
      vec_push(&opt.defines, (void *)d);
    } else if (!strcmp(a, "--variant") || !strcmp(a, "-I")) {
      if (i + 1 >= argc) return usage_error("%s needs an argument", a);
      if (a[1] == 'I') vec_push(&opt.include_dirs, argv[++i]);
      else opt.variant = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return usage_error("unknown option '%s'", a);
    } else if (!command) {
      command = a;
    } else if (!strcmp(command, "emit") && !what) {
      what = a;
    } else if (!opt.path) {
      opt.path = a;
    } else {
      return usage_error("unexpected argument '%s'", a);
    }
  }
  if (!command) return usage_error("%s", "no command given");
  if (!strcmp(command, "lsp")) {
    if (opt.path) return usage_error("%s", "lsp: the editor sends the files; give none");
    CheckSettings settings = {.defines = (const char **)opt.defines.items,
                              .ndefines = opt.defines.len,
                              .include_dirs = (const char **)opt.include_dirs.items,
                              .ninclude_dirs = opt.include_dirs.len, .variant = opt.variant};
    return lsp_serve(stdin, stdout, &settings);
  }
  if (strcmp(command, "check") && strcmp(command, "stats") && strcmp(command, "emit") &&
      strcmp(command, "build"))
    return usage_error("unknown command '%s' (commands: build, check, stats, emit, lsp)", command);
  static const char *const forms[] = {"ast", "graph", "dot", "kernels", "llvm", "asm", "ptx"};
  int form = -1;
  for (int i = 0; what && i < 7; i++)
    if (!strcmp(what, forms[i])) form = i;
  if (!strcmp(command, "emit") && form < 0)
    return usage_error("emit: unknown form '%s' (forms: ast, graph, dot, kernels, llvm, asm, ptx)",
                       what ? what : "");
  int graph_form = !strcmp(command, "emit") && strcmp(what, "ast");
  if ((train || decode || !optimize) && !graph_form)
    return usage_error("%s", "--train, --decode and --no-opt go with emit graph, dot, kernels, llvm, "
                             "asm or ptx");
  if (train && decode) return usage_error("%s", "--train and --decode name different graphs");
  if (dtype_given && strcmp(command, "build") && strcmp(command, "stats") && !graph_form)
    return usage_error("%s", "--dtype goes with build, stats and emit graph, dot, kernels, llvm, "
                             "asm or ptx");
  if (pretrained && (train || (form != 1 && form != 2)))
    return usage_error("%s", "--pretrained goes with emit graph or dot (not --train)");
  if ((dot.layers || dot.fused || dot.svg) && form != 2)
    return usage_error("%s", "--layers, --fused and --svg go with emit dot");
  if (!known_cpu(build.cpu))
    return usage_error("--cpu: unknown CPU '%s' (native, generic-dispatch, x86-64, x86-64-v2, "
                       "x86-64-v3, x86-64-v4, haswell, skylake, skylake-avx512, icelake-server, "
                       "sapphirerapids, znver1, znver2, znver3)", build.cpu);
  /* The variants are whole CPU builds; only build links them together. */
  if (!strcmp(build.cpu, "generic-dispatch") && (strcmp(command, "build") || build.cuda))
    return usage_error("%s", "--cpu generic-dispatch goes with build for the CPU; emit shows one "
                             "variant at a time (--cpu x86-64-v3 or x86-64-v4)");
  if (!opt.path) return usage_error("%s: no input file", command);
  /* cuBLAS runs on the GPU only: a CPU build's dots are its own GEMM. */
  if (build.cublas && !(!strcmp(command, "build") ? build.cuda : form == 6))
    return usage_error("%s", "--gemm=cublas goes with build --target cuda or emit ptx");

  if (!strcmp(command, "build")) {
    if (!build.output) return usage_error("%s", "build: give the executable's name with -o FILE");
    if (build.header && !build.shared) return usage_error("%s", "--header goes with --shared");
    if (build.shared && !build.header) {
      size_t n = strlen(build.output);
      int so = n > 3 && !strcmp(build.output + n - 3, ".so");
      build.header = pool_printf("%.*s.h", (int)(so ? n - 3 : n), build.output);
    }
    int status = build_binary(&opt, &build);
    if (status) {
      int n = diag_error_count();
      fprintf(stderr, "%d error%s\n", n, n == 1 ? "" : "s");
    }
    front_reset();
    return status;
  }
  CheckedModel *m;
  Graph *g = NULL;
  if (graph_form) {
    opt.training = 0; /* the forward graph: dropout is the identity */
    g = pretrained ? lower_pretrained_graph(&opt, pretrained, &m)
        : decode   ? lower_decode_model(&opt, &m)
                   : lower_model(&opt, train, &m);
    if (!g && decode && m && !diag_error_count())
      diag_error_noloc("model %s has no decode-step graph: it needs inputs tokens and targets "
                       "only, an output logits, and attention that keeps a key/value cache "
                       "(kv_cache, as std mha does)", m->name);
    if (g && optimize) g = optimize_graph(g);
    if (!g) m = NULL;
  }
  else m = sema_check(&opt);
  int status = 0;
  if (!m) {
    int n = diag_error_count();
    fprintf(stderr, "%d error%s\n", n, n == 1 ? "" : "s");
    status = 1;
  } else if (!strcmp(command, "check")) {
    print_summary(m);
  } else if (!strcmp(command, "stats")) {
    print_stats(m);
    status = stats_print_graphs(&opt);
    if (status) fprintf(stderr, "%d error%s\n", diag_error_count(), diag_error_count() == 1 ? "" : "s");
  } else if (g) {
    if (form == 1) graph_print(stdout, g);
    else if (form == 2) {
      dot.cuda = build.cuda;
      status = emit_dot(g, &dot);
    }
    else status = emit_code(g, form, build.cpu, &build);
  } else {
    for (int i = 0; i < m->programs.len; i++) ast_print(m->programs.items[i], stdout);
  }
  graph_free(g);
  front_reset();
  return status;
}
