/* The PTX simulator's own checks (sim/ptx_sim.h): that it runs a warp's
 * butterfly sum right, and that it reports what a GPU would do wrong or
 * silently: a shuffle some lanes of the warp never reach, lanes of a warp
 * at two barriers, a shared-memory race (a missing barrier), a store past
 * the end of an allocation, and PTX outside
 * what it simulates (an unknown instruction, an undeclared register),
 * each with the PTX line; and that a barrier waits only for the threads
 * that have not exited, as the PTX ISA says.
 *
 * With arguments, it loads each PTX file into the simulator instead (as
 * cuModuleLoadDataEx would) and fails on the first it refuses: the models'
 * PTX at their default configs (tests/gpu/ptx_models.sh), which the small
 * configs the simulator runs do not cover (kernels of hundreds of
 * buffers). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/ptx_sim.h"

static int failures;

static const char WARP_SUM[] =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry warp_sum(\n"
    "\t.param .u64 warp_sum_param_0,\n"
    "\t.param .u64 warp_sum_param_1\n"
    ")\n"
    "{\n"
    "\t.reg .pred %p<2>;\n"
    "\t.reg .b32 %r<4>;\n"
    "\t.reg .b64 %rd<5>;\n"
    "\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tld.param.u64 %rd1, [warp_sum_param_1];\n"
    "\tcvt.u64.u32 %rd2, %r1;\n"
    "\tsetp.ge.u64 %p1, %rd2, %rd1; // threads from param_1 on leave\n"
    "\t@%p1 bra $L__done;\n"
    "\tshfl.sync.bfly.b32 %r2, %r1, 16, 31, -1;\n" /* line 19 */
    "\tadd.s32 %r1, %r1, %r2;\n"
    "\tshfl.sync.bfly.b32 %r2, %r1, 8, 31, -1;\n"
    "\tadd.s32 %r1, %r1, %r2;\n"
    "\tshfl.sync.bfly.b32 %r2, %r1, 4, 31, -1;\n"
    "\tadd.s32 %r1, %r1, %r2;\n"
    "\tshfl.sync.bfly.b32 %r2, %r1, 2, 31, -1;\n"
    "\tadd.s32 %r1, %r1, %r2;\n"
    "\tshfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;\n"
    "\tadd.s32 %r1, %r1, %r2;\n"
    "\tbar.sync 0;\n" /* line 29 */
    "\tld.param.u64 %rd3, [warp_sum_param_0];\n"
    "\tcvta.to.global.u64 %rd3, %rd3;\n"
    "\tshl.b64 %rd4, %rd2, 2;\n"
    "\tadd.s64 %rd3, %rd3, %rd4;\n"
    "\tst.global.u32 [%rd3], %r1;\n" /* line 34 */
    "$L__done:\n"
    "\tret;\n"
    "}\n"
    "\n"
    ".visible .entry split_barrier(\n" /* line 38 */
    "\t.param .u64 split_barrier_param_0,\n"
    "\t.param .u64 split_barrier_param_1\n"
    ")\n"
    "{\n"
    "\t.reg .pred %p<2>;\n"
    "\t.reg .b32 %r<3>;\n"
    "\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tand.b32 %r2, %r1, 1;\n"
    "\tsetp.eq.s32 %p1, %r2, 0;\n"
    "\t@%p1 bra $L__even;\n"
    "\tbar.sync 0;\n" /* line 51: odd lanes */
    "\tbra.uni $L__end;\n"
    "$L__even:\n"
    "\tbar.sync 0;\n" /* line 54: even lanes */
    "$L__end:\n"
    "\tret;\n"
    "}\n"
    "\n"
    ".shared .align 4 .b8 exchange_buffer[128];\n"
    ".visible .entry exchange(\n"
    "\t.param .u64 exchange_param_0,\n"
    "\t.param .u64 exchange_param_1\n"
    ")\n"
    "{\n"
    "\t.reg .pred %p<2>;\n"
    "\t.reg .b32 %r<4>;\n"
    "\t.reg .b64 %rd<8>;\n"
    "\n"
    "\tmov.u32 %r1, %tid.x;\n"
    "\tmul.wide.u32 %rd1, %r1, 4;\n"
    "\tmov.u64 %rd2, exchange_buffer;\n"
    "\tadd.s64 %rd3, %rd2, %rd1;\n"
    "\tst.shared.u32 [%rd3], %r1;\n" /* line 73 */
    "\tld.param.u64 %rd4, [exchange_param_1]; // a barrier when not 0\n"
    "\tsetp.eq.s64 %p1, %rd4, 0;\n"
    "\t@%p1 bra $L__read;\n"
    "\tbar.sync 0;\n"
    "$L__read:\n"
    "\txor.b32 %r2, %r1, 1; // the neighbour's word\n"
    "\tmul.wide.u32 %rd5, %r2, 4;\n"
    "\tadd.s64 %rd5, %rd2, %rd5;\n"
    "\tld.shared.u32 %r3, [%rd5];\n"
    "\tld.param.u64 %rd6, [exchange_param_0];\n"
    "\tadd.s64 %rd7, %rd6, %rd1;\n"
    "\tst.global.u32 [%rd7], %r3;\n"
    "\tret;\n"
    "}\n";

/* Runs `entry` over `threads` threads with `limit` of them staying, into
 * an allocation of `ints` ints; the simulator's message, or "" */
static const char *run_entry(const char *ptx, const char *entry, unsigned threads, int64_t limit,
                             int ints, int *out) {
  static char err[512];
  PtxModule *m = ptx_sim_parse(ptx, err, sizeof err);
  if (!m)
    return err;
  int *buffer = malloc(sizeof *buffer * (size_t)ints);
  ptx_sim_add_region((uintptr_t)buffer, sizeof *buffer * (size_t)ints);
  uint64_t address = (uintptr_t)buffer;
  void *params[2] = {&address, &limit};
  if (ptx_sim_launch(ptx_sim_entry(m, entry), 1, threads, params, err, sizeof err) == 0)
    err[0] = '\0';
  if (out)
    memcpy(out, buffer, sizeof *buffer * (size_t)ints);
  ptx_sim_remove_region((uintptr_t)buffer);
  free(buffer);
  ptx_sim_free(m);
  return err;
}

static const char *run(const char *ptx, unsigned threads, int64_t limit, int ints, int *out) {
  return run_entry(ptx, "warp_sum", threads, limit, ints, out);
}

/* warp_sum of one warp, with the first `from` in its text replaced by
 * `to` (as long). */
static const char *run_edited(const char *from, const char *to) {
  char edited[sizeof WARP_SUM];
  memcpy(edited, WARP_SUM, sizeof WARP_SUM);
  memcpy(strstr(edited, from), to, strlen(to));
  return run(edited, 32, 32, 32, NULL);
}

static void expect(const char *what, const char *message, const char *wanted) {
  bool ok = wanted[0] ? strstr(message, wanted) != NULL : message[0] == '\0';
  printf("%s %s: %s\n", ok ? "ok  " : "FAIL", what, message[0] ? message : "(no error)");
  if (!ok) {
    printf("     wanted: %s\n", wanted[0] ? wanted : "no error");
    failures++;
  }
}

static int load_files(int count, char **paths) {
  for (int i = 0; i < count; i++) {
    FILE *f = fopen(paths[i], "rb");
    long n = f && !fseek(f, 0, SEEK_END) ? ftell(f) : -1;
    char *text = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
    if (!text || fseek(f, 0, SEEK_SET) || fread(text, 1, (size_t)n, f) != (size_t)n) {
      printf("FAIL %s: cannot read it\n", paths[i]);
      return 1;
    }
    fclose(f);
    char err[512];
    PtxModule *m = ptx_sim_parse(text, err, sizeof err);
    printf("%s %s: %s\n", m ? "ok  " : "FAIL", paths[i], m ? "the simulator loads it" : err);
    free(text);
    if (!m)
      return 1;
    ptx_sim_free(m);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1)
    return load_files(argc - 1, argv + 1);
  int out[64];
  expect("a warp's butterfly sum", run(WARP_SUM, 32, 32, 32, out), "");
  bool sums = true;
  for (int i = 0; i < 32; i++)
    sums &= out[i] == 31 * 32 / 2;
  printf("%s every lane holds 0 + 1 + ... + 31 = 496 (lane 0: %d)\n", sums ? "ok  " : "FAIL", out[0]);
  failures += !sums;
  expect("two warps", run(WARP_SUM, 64, 64, 64, NULL), "");
  expect("a shuffle half the warp skips", run(WARP_SUM, 32, 16, 32, NULL),
         "PTX line 19: lane 16 exited before its warp's shfl.sync");
  /* a barrier waits for the threads that have not exited (PTX ISA, exit) */
  expect("a barrier the second warp exited before", run(WARP_SUM, 64, 32, 64, out), "");
  printf("%s the first warp's lanes hold 496 (lane 31: %d)\n", out[31] == 496 ? "ok  " : "FAIL",
         out[31]);
  failures += out[31] != 496;
  expect("a warp's lanes at two barriers", run_entry(WARP_SUM, "split_barrier", 32, 0, 1, NULL),
         "lanes 0 and 1 of a warp wait at different barriers (PTX lines 54 and 51)");
  /* threads run one after another: without the barrier thread 0 reads
   * word 1 before thread 1 writes it, which the race check reports */
  expect("neighbours exchanging through shared memory after a barrier",
         run_entry(WARP_SUM, "exchange", 32, 1, 32, out), "");
  printf("%s each thread read its neighbour's index (thread 6: %d)\n", out[6] == 7 ? "ok  " : "FAIL",
         out[6]);
  failures += out[6] != 7;
  expect("the same exchange without the barrier", run_entry(WARP_SUM, "exchange", 32, 0, 32, NULL),
         "thread 1, PTX line 73: a shared-memory race: writes byte 4 of shared memory, which thread "
         "0 read with no bar.sync between");
  expect("an undeclared register", run_edited("%r1, %r2;", "%r1, %r9;"),
         "line 20: '%r9' is neither a declared register");
  expect("a store past the allocation", run(WARP_SUM, 32, 32, 31, NULL),
         "thread 31, PTX line 34: store of 4 bytes at");
  expect("an instruction it does not simulate", run_edited("add.s32", "sad.s32"),
         "line 20: unknown instruction 'sad.s32'");
  return failures ? 1 : 0;
}
