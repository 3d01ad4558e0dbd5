/* Runs a launch of a parsed PTX entry (ptx_sim.h). Each block's threads run
 * one at a time, each until it reaches a warp-wide instruction (shfl.sync,
 * mma.sync), a barrier or its end; when every live lane of a warp waits at
 * the same warp-wide instruction it runs for the warp, and when every live
 * thread of the block waits at a barrier the barrier opens. Any other
 * meeting (a lane exited or waiting elsewhere while its warp waits at a
 * shfl or mma, a warp's lanes at different barriers, threads waiting for
 * each other) is an error, as is a memory access outside what the kernel
 * may touch. A barrier waits only for the threads that have not exited. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mma_fragments.h"
#include "ptx_sim_internal.h"

/* ---- memory regions -------------------------------------------------- */

typedef struct Region {
  uintptr_t base;
  size_t bytes;
} Region;
static Region *regions;
static int num_regions, cap_regions;

void ptx_sim_add_region(uintptr_t base, size_t bytes) {
  if (num_regions == cap_regions) {
    cap_regions = cap_regions ? 2 * cap_regions : 16;
    regions = realloc(regions, sizeof *regions * (size_t)cap_regions);
    if (!regions)
      abort();
  }
  regions[num_regions++] = (Region){base, bytes};
}

void ptx_sim_remove_region(uintptr_t base) {
  for (int i = 0; i < num_regions; i++)
    if (regions[i].base == base) {
      regions[i] = regions[--num_regions];
      return;
    }
}

/* ---- threads and blocks ---------------------------------------------- */

enum { RUNNING, WAIT_WARP, WAIT_BARRIER, EXITED };

/* A call in progress: where to return and where the result goes. */
typedef struct Frame {
  int return_pc, callee, result;
} Frame;
#define MAX_CALL_DEPTH 8

typedef struct Thread {
  uint64_t *regs;
  uint8_t *local;
  uint8_t *frame; /* FRAME symbols */
  Frame calls[MAX_CALL_DEPTH];
  int depth;
  int pc;
  uint8_t state;
  bool carry;
} Thread;

/* Who last wrote and read a halfword of shared memory, and in which
 * barrier epoch: the race check (shared_access). reader -2: several. */
typedef struct SharedUse {
  int32_t writer, write_epoch, reader, read_epoch;
} SharedUse;

typedef struct Block {
  const PtxModule *m;
  const PtxEntry *e;
  unsigned ctaid, nctaid, ntid;
  uint8_t *shared;
  SharedUse *uses; /* a halfword of shared memory each */
  int32_t epoch;   /* barriers opened so far */
  uint8_t *params;
  Thread *threads;
  char *err;
  size_t err_size;
} Block;

static bool fault(Block *b, const Thread *t, const char *format, ...) {
  if (b->err[0])
    return false;
  int tid = (int)(t - b->threads);
  const Instr *in = &b->m->code[t->pc];
  int n = snprintf(b->err, b->err_size, "ptx sim: %s, block %u, thread %d, PTX line %d: ",
                   b->e->name, b->ctaid, tid, in->line);
  va_list args;
  va_start(args, format);
  if (n >= 0 && (size_t)n < b->err_size)
    vsnprintf(b->err + n, b->err_size - (size_t)n, format, args);
  va_end(args);
  return false;
}

static bool inside(uintptr_t a, size_t n, uintptr_t base, size_t bytes) {
  return a >= base && a + n <= base + bytes && a + n >= a;
}

bool ptx_sim_inside(uintptr_t a, size_t n) {
  for (int i = 0; i < num_regions; i++)
    if (inside(a, n, regions[i].base, regions[i].bytes))
      return true;
  return false;
}

static bool in_global(const Block *b, uintptr_t a, size_t n) {
  if (ptx_sim_inside(a, n))
    return true;
  for (int i = 0; i < b->m->num_symbols; i++) {
    const PtxSymbol *s = &b->m->symbols[i];
    if (s->kind == SYM_GLOBAL && inside(a, n, (uintptr_t)s->data, (size_t)s->bytes))
      return true;
  }
  return false;
}

static bool accessible(Block *b, Thread *t, int space, uintptr_t a, size_t n) {
  bool shared = inside(a, n, (uintptr_t)b->shared, (size_t)b->m->shared_bytes);
  bool local = inside(a, n, (uintptr_t)t->local, (size_t)b->m->local_bytes);
  switch (space) {
  case S_SHARED: return shared;
  case S_LOCAL: return local;
  case S_PARAM:
    return inside(a, n, (uintptr_t)b->params, (size_t)b->e->param_bytes) ||
           inside(a, n, (uintptr_t)t->frame, (size_t)b->m->frame_bytes);
  case S_GLOBAL: case S_CONST: return in_global(b, a, n);
  default: return shared || local || in_global(b, a, n);
  }
}

static uint64_t sreg(const Block *b, const Thread *t, int index) {
  int which = index / 4, component = index % 4;
  unsigned tid = (unsigned)(t - b->threads);
  switch (which) {
  case SR_TID: return component ? 0 : tid;
  case SR_NTID: return component ? 1 : b->ntid;
  case SR_CTAID: return component ? 0 : b->ctaid;
  case SR_NCTAID: return component ? 1 : b->nctaid;
  case SR_LANEID: return tid % 32;
  default: return tid / 32;
  }
}

static uint64_t symbol_address(const Block *b, const Thread *t, int symbol) {
  const PtxSymbol *s = &b->m->symbols[symbol];
  switch (s->kind) {
  case SYM_SHARED: return (uintptr_t)(b->shared + s->offset);
  case SYM_LOCAL: return (uintptr_t)(t->local + s->offset);
  case SYM_PARAM: return (uintptr_t)(b->params + s->offset);
  case SYM_FRAME: return (uintptr_t)(t->frame + s->offset);
  default: return (uintptr_t)s->data;
  }
}

static uint64_t value_other(const Block *b, const Thread *t, const Operand *o) {
  switch (o->kind) {
  case K_REG: return o->reg < 0 ? 0 : o->negated ? !(t->regs[o->reg] & 1) : t->regs[o->reg];
  case K_IMM: return o->imm;
  case K_SREG: return sreg(b, t, o->reg);
  case K_SYMBOL: return symbol_address(b, t, o->symbol);
  default: return 0;
  }
}

/* An operand's value: a register's in one step, the rest through the switch. */
static inline uint64_t value(const Block *b, const Thread *t, const Operand *o) {
  return o->kind == K_REG && o->reg >= 0 && !o->negated ? t->regs[o->reg] : value_other(b, t, o);
}

static uintptr_t address(const Block *b, const Thread *t, const Operand *o) {
  uint64_t base = o->reg >= 0 ? t->regs[o->reg] : o->symbol >= 0 ? symbol_address(b, t, o->symbol) : 0;
  return (uintptr_t)(base + (uint64_t)o->offset);
}

/* ---- typed values ------------------------------------------------------ */

static inline int bits_of(int type) { return type == T_PRED ? 1 : 8 * ptx_type_bytes(type); }
static bool is_signed(int type) { return type >= T_S8 && type <= T_S64; }
static bool is_float(int type) { return type == T_F32 || type == T_F64; }

static uint64_t mask_bits(uint64_t v, int bits) { return bits >= 64 ? v : v & ((1ull << bits) - 1); }
static int64_t sign_extend(uint64_t v, int bits) {
  if (bits >= 64)
    return (int64_t)v;
  uint64_t m = 1ull << (bits - 1);
  v = mask_bits(v, bits);
  return (int64_t)((v ^ m) - m);
}

static float as_f32(uint64_t v) {
  uint32_t u = (uint32_t)v;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static double as_f64(uint64_t v) {
  double d;
  memcpy(&d, &v, 8);
  return d;
}
static uint64_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static uint64_t f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}

static float flush(float x, bool ftz) {
  return ftz && fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

/* Writes the destination operand (a register; a vector when unpacking). */
static inline void set(Thread *t, const Operand *o, uint64_t v, int type) {
  if (o->kind == K_REG && o->reg >= 0)
    t->regs[o->reg] = mask_bits(v, bits_of(type));
}

/* ---- arithmetic ------------------------------------------------------- */

static double float_op(int op, double a, double b, double c, uint16_t flags) {
  switch (op) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return a / b;
  case OP_MAD: case OP_FMA: return fma(a, b, c);
  case OP_ABS: return fabs(a);
  case OP_NEG: return -a;
  case OP_MIN: case OP_MAX:
    if (isnan(a) || isnan(b))
      return (flags & F_NAN) || (isnan(a) && isnan(b)) ? NAN : isnan(a) ? b : a;
    if (a == b) /* -0 is below +0 */
      return (op == OP_MIN) == !!signbit(a) ? a : b;
    return (op == OP_MIN) == (a < b) ? a : b;
  default: return NAN;
  }
}

static float float_op32(int op, float a, float b, float c, uint16_t flags) {
  switch (op) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return a / b;
  case OP_MAD: case OP_FMA: return fmaf(a, b, c);
  default: return (float)float_op(op, a, b, c, flags);
  }
}

static bool integer_op(Block *b, Thread *t, const Instr *in, uint64_t *out) {
  int type = in->type, bits = bits_of(type);
  bool sgn = is_signed(type);
  uint64_t ua = value(b, t, &in->ops[1]), ub = in->nops > 2 ? value(b, t, &in->ops[2]) : 0;
  uint64_t uc = in->nops > 3 ? value(b, t, &in->ops[3]) : 0;
  int64_t sa = sign_extend(ua, bits), sb = sign_extend(ub, bits);
  ua = mask_bits(ua, bits), ub = mask_bits(ub, bits);
  switch (in->op) {
  case OP_ADD: case OP_ADDC: {
    uint64_t cin = in->op == OP_ADDC && t->carry;
    uint64_t r = ua + ub + cin;
    if (in->flags & F_CC)
      t->carry = bits == 64 ? (r < ua || (cin && r == ua)) : (r >> bits) & 1;
    *out = r;
    return true;
  }
  case OP_SUB: case OP_SUBC: {
    uint64_t bin = in->op == OP_SUBC && t->carry;
    uint64_t r = ua - ub - bin;
    if (in->flags & F_CC)
      t->carry = ua < ub + bin || (bin && ub + bin == 0);
    *out = r;
    return true;
  }
  case OP_MUL: case OP_MAD: case OP_MADC: {
    uint64_t lo, hi;
    if (bits == 64) {
      unsigned __int128 p = sgn ? (unsigned __int128)((__int128)sa * sb)
                                : (unsigned __int128)ua * ub;
      lo = (uint64_t)p, hi = (uint64_t)(p >> 64);
    } else {
      uint64_t p = sgn ? (uint64_t)(sa * sb) : ua * ub;
      lo = mask_bits(p, bits), hi = mask_bits(p >> bits, bits);
    }
    uint64_t r = (in->flags & F_HI) ? hi
                 : (in->flags & F_WIDE) ? (bits == 64 ? lo : lo | hi << bits)
                                        : lo;
    if (in->op != OP_MUL) {
      int width = (in->flags & F_WIDE) ? 2 * bits : bits;
      uint64_t cin = in->op == OP_MADC && t->carry, c = mask_bits(uc, width);
      uint64_t sum = mask_bits(r, width) + c + cin;
      if (in->flags & F_CC)
        t->carry = width == 64 ? (sum < c || (cin && sum == c)) : (sum >> width) & 1;
      r = sum;
    }
    *out = r;
    return true;
  }
  case OP_DIV: case OP_REM:
    if (ub == 0) {
      *out = ~0ull;
    } else if (sgn) {
      if (sb == -1)
        *out = in->op == OP_DIV ? 0 - (uint64_t)sa : 0;
      else
        *out = (uint64_t)(in->op == OP_DIV ? sa / sb : sa % sb);
    } else {
      *out = in->op == OP_DIV ? ua / ub : ua % ub;
    }
    return true;
  case OP_ABS: *out = sa < 0 ? 0 - (uint64_t)sa : (uint64_t)sa; return true;
  case OP_NEG: *out = 0 - (uint64_t)sa; return true;
  case OP_MIN: *out = sgn ? (uint64_t)(sa < sb ? sa : sb) : (ua < ub ? ua : ub); return true;
  case OP_MAX: *out = sgn ? (uint64_t)(sa > sb ? sa : sb) : (ua > ub ? ua : ub); return true;
  case OP_AND: *out = ua & ub; return true;
  case OP_OR: *out = ua | ub; return true;
  case OP_XOR: *out = ua ^ ub; return true;
  case OP_NOT: *out = ~ua; return true;
  case OP_CNOT: *out = ua == 0; return true;
  case OP_SHL: {
    uint64_t amount = mask_bits(value(b, t, &in->ops[2]), 32);
    *out = amount >= (uint64_t)bits ? 0 : ua << amount;
    return true;
  }
  case OP_SHR: {
    uint64_t amount = mask_bits(value(b, t, &in->ops[2]), 32);
    if (sgn)
      *out = (uint64_t)(amount >= (uint64_t)bits ? (sa < 0 ? -1 : 0) : sa >> amount);
    else
      *out = amount >= (uint64_t)bits ? 0 : ua >> amount;
    return true;
  }
  case OP_BFE: {
    int pos = (int)(ub & 0xff), len = (int)(uc & 0xff), msb = bits - 1;
    int top = pos + len - 1 < msb ? pos + len - 1 : msb;
    uint64_t sbit = sgn && len != 0 ? (ua >> top) & 1 : 0, r = 0;
    for (int i = 0; i < bits; i++) {
      uint64_t bit = i < len && pos + i <= msb ? (ua >> (pos + i)) & 1 : sbit;
      r |= bit << i;
    }
    *out = r;
    return true;
  }
  case OP_BFI: {
    uint64_t ud = value(b, t, &in->ops[4]);
    int pos = (int)(uc & 0xff), len = (int)(ud & 0xff);
    uint64_t r = ub;
    for (int i = 0; i < len && pos + i < bits; i++)
      r = (r & ~(1ull << (pos + i))) | (((ua >> i) & 1) << (pos + i));
    *out = r;
    return true;
  }
  case OP_POPC: *out = (uint64_t)__builtin_popcountll(ua); return true;
  case OP_CLZ: *out = ua == 0 ? (uint64_t)bits : (uint64_t)(__builtin_clzll(ua) - (64 - bits)); return true;
  case OP_BREV: {
    uint64_t r = 0;
    for (int i = 0; i < bits; i++)
      r |= ((ua >> i) & 1) << (bits - 1 - i);
    *out = r;
    return true;
  }
  case OP_PRMT: {
    uint64_t bytes = ua | ub << 32, r = 0;
    for (int i = 0; i < 4; i++) {
      unsigned sel = (unsigned)(uc >> (4 * i)) & 0xf;
      uint64_t byte = (bytes >> (8 * (sel & 7))) & 0xff;
      if (sel & 8)
        byte = (byte & 0x80) ? 0xff : 0;
      r |= byte << (8 * i);
    }
    *out = r;
    return true;
  }
  default: return fault(b, t, "this instruction is not simulated for integer types");
  }
}

static bool arithmetic(Block *b, Thread *t, const Instr *in) {
  int type = in->type;
  bool ftz = in->flags & F_FTZ;
  if (in->type == T_PRED) { /* and/or/xor/not of predicates */
    uint64_t r;
    if (!integer_op(b, t, in, &r))
      return false;
    set(t, &in->ops[0], r & 1, T_PRED);
    return true;
  }
  if (type == T_F32) {
    float a = flush(as_f32(value(b, t, &in->ops[1])), ftz);
    float c2 = in->nops > 2 ? flush(as_f32(value(b, t, &in->ops[2])), ftz) : 0;
    float c3 = in->nops > 3 ? flush(as_f32(value(b, t, &in->ops[3])), ftz) : 0;
    float r = float_op32(in->op, a, c2, c3, in->flags);
    if (in->flags & F_SAT)
      r = isnan(r) ? 0.0f : r < 0 ? 0.0f : r > 1 ? 1.0f : r;
    set(t, &in->ops[0], f32_bits(flush(r, ftz)), T_F32);
    return true;
  }
  if (type == T_F64) {
    double a = as_f64(value(b, t, &in->ops[1]));
    double c2 = in->nops > 2 ? as_f64(value(b, t, &in->ops[2])) : 0;
    double c3 = in->nops > 3 ? as_f64(value(b, t, &in->ops[3])) : 0;
    set(t, &in->ops[0], f64_bits(float_op(in->op, a, c2, c3, in->flags)), T_F64);
    return true;
  }
  uint64_t r;
  if (!integer_op(b, t, in, &r))
    return false;
  int out_type = type;
  if (in->flags & F_WIDE)
    out_type = bits_of(type) == 16 ? T_B32 : T_B64;
  set(t, &in->ops[0], r, out_type);
  return true;
}

static bool special(Block *b, Thread *t, const Instr *in) {
  bool ftz = in->flags & F_FTZ;
  if (in->type == T_F64) {
    double a = as_f64(value(b, t, &in->ops[1])), r;
    switch (in->op) {
    case OP_RCP: r = 1.0 / a; break;
    case OP_SQRT: r = sqrt(a); break;
    case OP_RSQRT: r = 1.0 / sqrt(a); break;
    case OP_COPYSIGN: r = copysign(as_f64(value(b, t, &in->ops[2])), a); break;
    default: return fault(b, t, "this instruction is not simulated for f64");
    }
    set(t, &in->ops[0], f64_bits(r), T_F64);
    return true;
  }
  float a = flush(as_f32(value(b, t, &in->ops[1])), ftz), r;
  switch (in->op) {
  case OP_RCP: r = 1.0f / a; break;
  case OP_SQRT: r = sqrtf(a); break;
  case OP_RSQRT: r = 1.0f / sqrtf(a); break;
  case OP_EX2: r = exp2f(a); break;
  case OP_LG2: r = log2f(a); break;
  case OP_SIN: r = sinf(a); break;
  case OP_COS: r = cosf(a); break;
  case OP_TANH: r = tanhf(a); break;
  case OP_COPYSIGN: r = copysignf(as_f32(value(b, t, &in->ops[2])), a); break;
  default: return fault(b, t, "not simulated");
  }
  set(t, &in->ops[0], f32_bits(flush(r, ftz)), T_F32);
  return true;
}

static bool compare_floats(int cmp, double a, double b) {
  bool unordered = isnan(a) || isnan(b);
  switch (cmp) {
  case C_EQ: return !unordered && a == b;
  case C_NE: return !unordered && a != b;
  case C_LT: return !unordered && a < b;
  case C_LE: return !unordered && a <= b;
  case C_GT: return !unordered && a > b;
  case C_GE: return !unordered && a >= b;
  case C_EQU: return unordered || a == b;
  case C_NEU: return unordered || a != b;
  case C_LTU: return unordered || a < b;
  case C_LEU: return unordered || a <= b;
  case C_GTU: return unordered || a > b;
  case C_GEU: return unordered || a >= b;
  case C_NUM: return !unordered;
  case C_NAN: return unordered;
  default: return false;
  }
}

static bool setp(Block *b, Thread *t, const Instr *in) {
  int type = in->type, bits = bits_of(type);
  uint64_t ra = value(b, t, &in->ops[1]), rb = value(b, t, &in->ops[2]);
  bool r;
  if (is_float(type)) {
    double a = type == T_F32 ? as_f32(ra) : as_f64(ra), c = type == T_F32 ? as_f32(rb) : as_f64(rb);
    if (in->flags & F_FTZ)
      a = flush((float)a, true), c = flush((float)c, true);
    r = compare_floats(in->compare, a, c);
  } else {
    bool sgn = is_signed(type) && in->compare <= C_GE;
    int64_t sa = sign_extend(ra, bits), sb = sign_extend(rb, bits);
    uint64_t ua = mask_bits(ra, bits), ub = mask_bits(rb, bits);
    switch (in->compare) {
    case C_EQ: r = ua == ub; break;
    case C_NE: r = ua != ub; break;
    case C_LT: r = sgn ? sa < sb : ua < ub; break;
    case C_LE: r = sgn ? sa <= sb : ua <= ub; break;
    case C_GT: r = sgn ? sa > sb : ua > ub; break;
    case C_GE: r = sgn ? sa >= sb : ua >= ub; break;
    case C_LO: r = ua < ub; break;
    case C_LS: r = ua <= ub; break;
    case C_HI: r = ua > ub; break;
    case C_HS: r = ua >= ub; break;
    default: return fault(b, t, "this comparison is not simulated for integers");
    }
  }
  bool r2 = !r;
  if (in->bool_op >= 0) {
    bool c = value(b, t, &in->ops[3]) & 1;
    r = in->bool_op == OP_AND ? r && c : in->bool_op == OP_OR ? r || c : r != c;
    r2 = in->bool_op == OP_AND ? r2 && c : in->bool_op == OP_OR ? r2 || c : r2 != c;
  }
  set(t, &in->ops[0], r, T_PRED);
  if (in->pred_out >= 0)
    t->regs[in->pred_out] = r2;
  return true;
}

/* ---- conversions -------------------------------------------------------- */

static uint64_t bf16_from_f32(float x) {
  uint32_t u = (uint32_t)f32_bits(x);
  if (isnan(x))
    return 0x7fff;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

static uint64_t tf32_from_f32(uint64_t bits) {
  uint32_t u = (uint32_t)bits;
  if ((u & 0x7f800000u) == 0x7f800000u)
    return u; /* infinity and NaN kept */
  return (u + 0x1000u) & 0xffffe000u;
}

static double round_integral(double x, int round) {
  switch (round) {
  case R_RZI: return trunc(x);
  case R_RMI: return floor(x);
  case R_RPI: return ceil(x);
  default: return nearbyint(x); /* rni: to nearest even */
  }
}

/* Float to integer: rounded as asked, saturating, NaN to 0 (PTX ISA). */
static uint64_t float_to_integer(double x, int round, int to) {
  if (isnan(x))
    return 0;
  int bits = bits_of(to);
  x = round_integral(x, round);
  double lo = is_signed(to) ? -ldexp(1, bits - 1) : 0;
  double limit = is_signed(to) ? ldexp(1, bits - 1) : ldexp(1, bits);
  if (x < lo)
    return is_signed(to) ? (uint64_t)1 << (bits - 1) : 0;
  if (x >= limit)
    return is_signed(to) ? ((uint64_t)1 << (bits - 1)) - 1 : mask_bits(~0ull, bits);
  return is_signed(to) ? (uint64_t)(int64_t)x : (uint64_t)x;
}

/* cvt, in the combinations ptx_parse.c's `simulated` admits. */
static bool convert(Block *b, Thread *t, const Instr *in) {
  int to = in->type, from = in->type2, bits_from = bits_of(from);
  uint64_t raw = value(b, t, &in->ops[1]);
  bool ftz = in->flags & F_FTZ;
  if (to == T_TF32) { /* from f32, .rna */
    set(t, &in->ops[0], tf32_from_f32(raw), T_B32);
    return true;
  }
  if (to == T_BF16) { /* from f32, .rn */
    set(t, &in->ops[0], bf16_from_f32(as_f32(raw)), T_B16);
    return true;
  }
  if (from == T_BF16) { /* to f32, exactly */
    set(t, &in->ops[0], (raw & 0xffff) << 16, T_F32);
    return true;
  }
  if (!is_float(from)) {
    if (to == T_F32) /* rounded once, from the integer */
      set(t, &in->ops[0], f32_bits(is_signed(from) ? (float)sign_extend(raw, bits_from)
                                                   : (float)mask_bits(raw, bits_from)), T_F32);
    else if (to == T_F64)
      set(t, &in->ops[0], f64_bits(is_signed(from) ? (double)sign_extend(raw, bits_from)
                                                   : (double)mask_bits(raw, bits_from)), T_F64);
    else /* between integers: truncated or extended */
      set(t, &in->ops[0], is_signed(from) ? (uint64_t)sign_extend(raw, bits_from)
                                          : mask_bits(raw, bits_from), to);
    return true;
  }
  double x = from == T_F32 ? flush(as_f32(raw), ftz) : as_f64(raw);
  if (!is_float(to)) {
    set(t, &in->ops[0], float_to_integer(x, in->round, to), to);
    return true;
  }
  if (in->round >= R_RNI)
    x = round_integral(x, in->round);
  if (in->flags & F_SAT) /* clamped to [0, 1], NaN to 0 */
    x = isnan(x) ? 0 : x < 0 ? 0 : x > 1 ? 1 : x;
  if (to == T_F32)
    set(t, &in->ops[0], f32_bits(flush((float)x, ftz)), T_F32);
  else
    set(t, &in->ops[0], f64_bits(x), T_F64);
  return true;
}

/* mov: a value, an address or a special register; or packing registers
 * into a wider one ({lo, hi}) and unpacking one into several. */
static bool move(Block *b, Thread *t, const Instr *in) {
  const Operand *d = &in->ops[0], *s = &in->ops[1];
  int bits = bits_of(in->type);
  if (d->kind == K_VEC) {
    uint64_t v = value(b, t, s);
    int part = bits / d->count;
    for (int i = 0; i < d->count; i++)
      if (d->vec[i] >= 0)
        t->regs[d->vec[i]] = mask_bits(v >> (part * i), part);
    return true;
  }
  if (s->kind == K_VEC) {
    int part = bits / s->count;
    uint64_t v = 0;
    for (int i = 0; i < s->count; i++)
      v |= mask_bits(s->vec[i] >= 0 ? t->regs[s->vec[i]] : 0, part) << (part * i);
    set(t, d, v, in->type);
    return true;
  }
  set(t, d, value(b, t, s), in->type);
  return true;
}

/* ---- memory ----------------------------------------------------------- */

/* A thread's access to shared memory must not meet another thread's
 * write, or its write another thread's read, in the same barrier epoch:
 * between them no bar.sync orders the two, so the result depends on the
 * threads' timing (on a GPU) or on the order they run in (here, where
 * threads run one after another and a missing barrier would not show).
 * Lanes of one warp count as apart too: from Volta on, a warp's lanes are
 * not in lockstep. */
static bool shared_access(Block *b, Thread *t, uintptr_t a, size_t bytes, bool load) {
  int32_t tid = (int32_t)(t - b->threads);
  size_t first = (a - (uintptr_t)b->shared) / 2, end = (a - (uintptr_t)b->shared + bytes + 1) / 2;
  /* the halfwords the launch set up: those of the shared variables the entry names */
  if ((int64_t)first < b->e->shared_first / 2 || (int64_t)end > (b->e->shared_end + 1) / 2)
    return fault(b, t, "an access to shared memory outside the variables this kernel names");
  for (size_t h = first; h < end; h++) {
    SharedUse *u = &b->uses[h];
    bool wrote = u->write_epoch == b->epoch && u->writer != tid;
    bool read = !load && u->read_epoch == b->epoch && u->reader != tid;
    if (wrote || read) {
      char who[32] = "other threads";
      if ((wrote ? u->writer : u->reader) >= 0)
        snprintf(who, sizeof who, "thread %d", wrote ? u->writer : u->reader);
      return fault(b, t, "a shared-memory race: %s byte %zu of shared memory, which %s %s with "
                         "no bar.sync between", load ? "reads" : "writes", 2 * h, who,
                   wrote ? "wrote" : "read");
    }
    if (!load) {
      u->writer = tid;
      u->write_epoch = b->epoch;
    } else if (u->read_epoch != b->epoch) {
      u->reader = tid;
      u->read_epoch = b->epoch;
    } else if (u->reader != tid) {
      u->reader = -2;
    }
  }
  return true;
}

static bool load_store(Block *b, Thread *t, const Instr *in) {
  bool load = in->op == OP_LD;
  const Operand *addr = &in->ops[load ? 1 : 0], *data = &in->ops[load ? 0 : 1];
  if (addr->kind != K_ADDR)
    return fault(b, t, "a memory operand must be [address]");
  int size = ptx_type_bytes(in->type), count = in->vec ? in->vec : 1;
  uintptr_t a = address(b, t, addr);
  if (a & (uintptr_t)(size * count - 1)) /* a vector is aligned to its whole size (a power of 2) */
    return fault(b, t, "misaligned %d-byte access at %#lx", size * count, (unsigned long)a);
  if (!accessible(b, t, in->space, a, (size_t)(size * count)))
    return fault(b, t, "%s of %d bytes at %#lx, outside every %s", load ? "load" : "store",
                 size * count, (unsigned long)a,
                 in->space == S_SHARED ? "shared variable" : in->space == S_LOCAL ? "local depot"
                 : in->space == S_PARAM ? "parameter" : "allocation");
  if (inside(a, (size_t)(size * count), (uintptr_t)b->shared, (size_t)b->m->shared_bytes) &&
      !shared_access(b, t, a, (size_t)(size * count), load))
    return false;
  for (int i = 0; i < count; i++) {
    uint8_t *p = (uint8_t *)a + i * size;
    if (load) {
      uint64_t v = 0;
      memcpy(&v, p, (size_t)size);
      if (is_signed(in->type))
        v = (uint64_t)sign_extend(v, 8 * size);
      const Operand one = {.kind = K_REG, .reg = data->kind == K_VEC ? data->vec[i] : data->reg};
      set(t, &one, v, is_signed(in->type) ? T_B64 : in->type);
    } else {
      uint64_t v = data->kind == K_VEC ? (data->vec[i] >= 0 ? t->regs[data->vec[i]] : 0)
                                        : value(b, t, data);
      memcpy(p, &v, (size_t)size);
    }
  }
  return true;
}

/* ---- calls ---------------------------------------------------------- */

static void copy_symbol(Block *b, Thread *t, int to, int from) {
  const PtxSymbol *d = &b->m->symbols[to], *s = &b->m->symbols[from];
  memcpy((void *)symbol_address(b, t, to), (const void *)symbol_address(b, t, from),
         (size_t)(d->bytes < s->bytes ? d->bytes : s->bytes));
}

static bool call(Block *b, Thread *t, const Instr *in) {
  if (t->depth == MAX_CALL_DEPTH)
    return fault(b, t, "calls nest deeper than %d", MAX_CALL_DEPTH);
  const PtxEntry *callee = &b->m->entries[in->ops[1].target];
  for (int i = 2; i < in->nops; i++)
    copy_symbol(b, t, callee->frame_param[i - 2], in->ops[i].symbol);
  t->calls[t->depth++] = (Frame){t->pc + 1, in->ops[1].target, in->ops[0].symbol};
  t->pc = callee->first;
  return true;
}

/* ---- one thread until it must wait ------------------------------------ */

static bool step(Block *b, Thread *t) {
  const Instr *in = &b->m->code[t->pc];
  if (in->guard >= 0 && ((t->regs[in->guard] & 1) == in->guard_negated)) {
    t->pc++;
    return true;
  }
  switch (in->op) {
  case OP_BRA: t->pc = in->ops[0].target; return true;
  case OP_CALL: return call(b, t, in);
  case OP_RET:
    if (t->depth > 0) {
      const Frame *f = &t->calls[--t->depth];
      int result = b->m->entries[f->callee].frame_return;
      if (f->result >= 0)
        copy_symbol(b, t, f->result, result);
      t->pc = f->return_pc;
      return true;
    }
    t->state = EXITED;
    return true;
  case OP_EXIT: t->state = EXITED; return true;
  case OP_SHFL: case OP_MMA: t->state = WAIT_WARP; return true;
  case OP_BAR:
    if (in->nops > 1)
      return fault(b, t, "bar.sync with a thread count is not simulated");
    t->state = WAIT_BARRIER;
    return true;
  case OP_MEMBAR: break;
  case OP_SETP: if (!setp(b, t, in)) return false; break;
  case OP_SELP: {
    bool p = value(b, t, &in->ops[3]) & 1;
    set(t, &in->ops[0], value(b, t, &in->ops[p ? 1 : 2]), in->type);
    break;
  }
  case OP_MOV: if (!move(b, t, in)) return false; break;
  case OP_CVT: if (!convert(b, t, in)) return false; break;
  case OP_CVTA: set(t, &in->ops[0], value(b, t, &in->ops[1]), T_B64); break;
  case OP_LD: case OP_ST: if (!load_store(b, t, in)) return false; break;
  case OP_RCP: case OP_SQRT: case OP_RSQRT: case OP_EX2: case OP_LG2: case OP_SIN: case OP_COS:
  case OP_TANH: case OP_COPYSIGN:
    if (!special(b, t, in)) return false;
    break;
  case OP_TESTP: return fault(b, t, "testp is not simulated");
  default: if (!arithmetic(b, t, in)) return false; break;
  }
  t->pc++;
  return true;
}

static bool run_thread(Block *b, Thread *t) {
  while (t->state == RUNNING) {
    if (t->pc >= b->m->num_code)
      return fault(b, t, "ran past the end of the code");
    if (!step(b, t))
      return false;
  }
  return true;
}

/* ---- warp-wide instructions ------------------------------------------- */

static bool shuffle(Block *b, Thread *lanes, const Instr *in) {
  uint64_t src[32], out[32];
  bool valid[32];
  for (int l = 0; l < 32; l++)
    src[l] = value(b, &lanes[l], &in->ops[1]);
  for (int l = 0; l < 32; l++) {
    Thread *t = &lanes[l];
    if ((uint32_t)value(b, t, &in->ops[4]) != 0xffffffffu)
      return fault(b, t, "shfl.sync with a partial member mask is not simulated");
    unsigned bval = (unsigned)value(b, t, &in->ops[2]) & 31, c = (unsigned)value(b, t, &in->ops[3]);
    unsigned clamp = c & 31, segmask = (c >> 8) & 31;
    int max_lane = (int)((l & segmask) | (clamp & ~segmask)), min_lane = (int)(l & segmask), j;
    switch (in->shuffle) {
    case SH_UP: j = l - (int)bval; valid[l] = j >= max_lane; break;
    case SH_DOWN: j = l + (int)bval; valid[l] = j <= max_lane; break;
    case SH_IDX: j = min_lane | (int)(bval & ~segmask); valid[l] = j <= max_lane; break;
    default: j = l ^ (int)bval; valid[l] = j <= max_lane; break;
    }
    out[l] = valid[l] && j >= 0 && j < 32 ? src[j] : src[l];
  }
  for (int l = 0; l < 32; l++) {
    set(&lanes[l], &in->ops[0], out[l], T_B32);
    if (in->pred_out >= 0)
      lanes[l].regs[in->pred_out] = valid[l];
  }
  return true;
}

static float vec_f32(const Thread *t, const Operand *o, int i) {
  return as_f32(o->vec[i] >= 0 ? t->regs[o->vec[i]] : 0);
}

static bool matrix_multiply(Block *b, Thread *lanes, const Instr *in) {
  const Operand *d = &in->ops[0], *a = &in->ops[1], *bb = &in->ops[2], *c = &in->ops[3];
  float fc[32][4];
  for (int l = 0; l < 32; l++)
    for (int i = 0; i < 4; i++)
      fc[l][i] = vec_f32(&lanes[l], c, i);
  if (in->type2 == T_TF32) {
    float fa[32][4], fb[32][2];
    for (int l = 0; l < 32; l++) {
      for (int i = 0; i < 4; i++) /* the tensor cores read 19 bits of each */
        fa[l][i] = as_f32(lanes[l].regs[a->vec[i]] & 0xffffe000u);
      for (int i = 0; i < 2; i++)
        fb[l][i] = as_f32(lanes[l].regs[bb->vec[i]] & 0xffffe000u);
    }
    tfm_mma_m16n8k8_tf32(fa, fb, fc);
  } else if (in->type2 == T_BF16) {
    float fa[32][8], fb[32][4];
    for (int l = 0; l < 32; l++) {
      for (int i = 0; i < 8; i++)
        fa[l][i] = as_f32((lanes[l].regs[a->vec[i / 2]] >> (16 * (i % 2)) & 0xffff) << 16);
      for (int i = 0; i < 4; i++)
        fb[l][i] = as_f32((lanes[l].regs[bb->vec[i / 2]] >> (16 * (i % 2)) & 0xffff) << 16);
    }
    tfm_mma_m16n8k16_bf16(fa, fb, fc);
  } else {
    return fault(b, &lanes[0], "this mma.sync is not simulated");
  }
  for (int l = 0; l < 32; l++)
    for (int i = 0; i < 4; i++)
      if (d->vec[i] >= 0)
        lanes[l].regs[d->vec[i]] = f32_bits(fc[l][i]);
  return true;
}

/* Runs warp w's waiting instruction if every lane waits at it. Returns
 * 1 when it ran, 0 when the warp is not waiting, -1 on an error. */
static int resolve_warp(Block *b, int w) {
  Thread *lanes = &b->threads[w * 32];
  int waiting = -1, count = (int)b->ntid - w * 32 < 32 ? (int)b->ntid - w * 32 : 32;
  for (int l = 0; l < count; l++)
    if (lanes[l].state == WAIT_WARP)
      waiting = l;
  if (waiting < 0)
    return 0;
  int pc = lanes[waiting].pc;
  const Instr *in = &b->m->code[pc];
  if (count < 32)
    return fault(b, &lanes[waiting], "a warp-wide instruction in a warp of fewer than 32 threads"), -1;
  for (int l = 0; l < 32; l++) {
    if (lanes[l].state == WAIT_WARP && lanes[l].pc == pc)
      continue;
    if (lanes[l].state == EXITED)
      return fault(b, &lanes[waiting], "lane %d exited before its warp's %s", l,
                   in->op == OP_MMA ? "mma.sync" : "shfl.sync"), -1;
    if (lanes[l].state == WAIT_BARRIER)
      return 0; /* may still be resolved after the barrier: checked at deadlock */
    return fault(b, &lanes[waiting], "lane %d waits at PTX line %d while lane %d waits here: a "
                 "divergent warp-wide instruction", l, b->m->code[lanes[l].pc].line, waiting), -1;
  }
  bool ok = in->op == OP_MMA ? matrix_multiply(b, lanes, in) : shuffle(b, lanes, in);
  if (!ok)
    return -1;
  for (int l = 0; l < 32; l++) {
    lanes[l].pc++;
    lanes[l].state = RUNNING;
  }
  return 1;
}

static bool run_block(Block *b) {
  unsigned n = b->ntid;
  int warps = (int)((n + 31) / 32);
  for (;;) {
    for (unsigned i = 0; i < n; i++)
      if (!run_thread(b, &b->threads[i]))
        return false;
    bool progress = false;
    for (int w = 0; w < warps; w++) {
      int r = resolve_warp(b, w);
      if (r < 0)
        return false;
      progress |= r > 0;
    }
    if (progress)
      continue;
    unsigned at_barrier = 0, exited = 0;
    int first = -1;
    for (unsigned i = 0; i < n; i++) {
      at_barrier += b->threads[i].state == WAIT_BARRIER;
      exited += b->threads[i].state == EXITED;
      if (b->threads[i].state != EXITED && first < 0)
        first = (int)i;
    }
    if (exited == n)
      return true;
    /* A barrier waits for the threads that have not exited (PTX ISA,
     * exit). bar.sync is .aligned: a warp's lanes must wait at the same one. */
    if (at_barrier + exited == n) {
      for (unsigned i = 0; i < n; i++) {
        Thread *t = &b->threads[i], *lead = &b->threads[i / 32 * 32];
        if (t->state != WAIT_BARRIER)
          continue;
        while (lead->state != WAIT_BARRIER) /* stops at t at the latest */
          lead++;
        if (t->pc != lead->pc)
          return fault(b, t, "lanes %u and %u of a warp wait at different barriers (PTX lines "
                             "%d and %d): bar.sync is .aligned",
                       (unsigned)(lead - b->threads) % 32, i % 32, b->m->code[lead->pc].line,
                       b->m->code[t->pc].line);
      }
      b->epoch++;
      for (unsigned i = 0; i < n; i++)
        if (b->threads[i].state == WAIT_BARRIER) {
          b->threads[i].pc++;
          b->threads[i].state = RUNNING;
        }
      continue;
    }
    return fault(b, &b->threads[first], "deadlock: %u threads at barriers, the rest at warp-wide "
                 "instructions their warps do not all reach", at_barrier);
  }
}

int ptx_sim_num_params(const PtxEntry *e) { return e->num_params; }

size_t ptx_sim_param_bytes(const PtxEntry *e, int i) {
  return (size_t)e->module->symbols[e->params[i]].bytes;
}

int ptx_sim_launch(const PtxEntry *e, unsigned grid, unsigned block, void **params, char *err,
                   size_t err_size) {
  const PtxModule *m = e->module;
  err[0] = '\0';
  Block b = {.m = m, .e = e, .nctaid = grid, .ntid = block, .err = err, .err_size = err_size};
  b.params = calloc((size_t)e->param_bytes + 8, 1);
  b.shared = malloc((size_t)m->shared_bytes + 8);
  b.uses = malloc(sizeof *b.uses * (size_t)(m->shared_bytes / 2 + 1));
  b.threads = calloc(block, sizeof *b.threads);
  /* not zeroed: only the registers a thread can use, its entry's and
   * the device functions', are (pages of the rest are never touched) */
  uint64_t *regs = malloc((size_t)block * (size_t)(m->num_regs + 1) * sizeof *regs);
  int ranges[2 * 64], num_ranges = 0;
  for (int f = 0; f < m->num_entries && num_ranges < 64; f++)
    if (&m->entries[f] == e || m->entries[f].device_function) {
      ranges[2 * num_ranges] = m->entries[f].reg_first;
      ranges[2 * num_ranges++ + 1] = m->entries[f].reg_end;
    }
  uint8_t *local = calloc((size_t)block * (size_t)(m->local_bytes + 8), 1);
  uint8_t *frames = calloc((size_t)block * (size_t)(m->frame_bytes + 8), 1);
  int status = 0;
  if (!b.params || !b.shared || !b.uses || !b.threads || !regs || !local || !frames) {
    snprintf(err, err_size, "ptx sim: out of memory");
    status = -1;
  }
  for (int i = 0; status == 0 && i < e->num_params; i++)
    memcpy(b.params + m->symbols[e->params[i]].offset, params[i],
           (size_t)m->symbols[e->params[i]].bytes);
  for (unsigned c = 0; status == 0 && c < grid; c++) {
    b.ctaid = c;
    /* each block's shared memory starts undefined: 0xff bytes (NaN) show a
     * read before a write, also of what the block before left */
    if (e->shared_end > e->shared_first) {
      memset(b.shared + e->shared_first, 0xff, (size_t)(e->shared_end - e->shared_first));
      for (int64_t h = e->shared_first / 2; h < (e->shared_end + 1) / 2; h++)
        b.uses[h] = (SharedUse){.writer = -1, .write_epoch = -1, .reader = -1, .read_epoch = -1};
    }
    b.epoch = 0;
    for (unsigned i = 0; i < block; i++) {
      Thread *t = &b.threads[i];
      *t = (Thread){.regs = regs + (size_t)i * (size_t)(m->num_regs + 1), .pc = e->first,
                    .local = local + (size_t)i * (size_t)(m->local_bytes + 8),
                    .frame = frames + (size_t)i * (size_t)(m->frame_bytes + 8)};
      for (int r = 0; r < num_ranges; r++)
        memset(t->regs + ranges[2 * r], 0, sizeof *regs * (size_t)(ranges[2 * r + 1] - ranges[2 * r]));
    }
    if (!run_block(&b))
      status = -1;
  }
  free(b.params);
  free(b.shared);
  free(b.uses);
  free(b.threads);
  free(regs);
  free(local);
  free(frames);
  return status;
}
