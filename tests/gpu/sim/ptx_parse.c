/* PTX text to ptx_sim_internal.h's form: module-level variables, entries
 * and device functions with their parameters and local variables, and
 * instructions with their operands resolved. Anything outside the subset
 * tfm's PTX uses (f16 arithmetic, roundings other than to nearest,
 * textures, unknown opcode parts, undeclared registers) is refused with
 * its line, so that nothing runs with a meaning the simulator does not
 * have. */
#define _POSIX_C_SOURCE 200809L /* strdup, strndup */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_sim_internal.h"

typedef struct Parser {
  PtxModule *m;
  const char *p;
  int line;
  char *err;
  size_t err_size;
  bool failed;
  /* the function being parsed: its labels, and branches waiting for them */
  char **labels;
  int *label_at, num_labels, cap_labels;
  int *pending; /* instructions whose K_LABEL operand 0 names labels[ops[0].target] */
  int num_pending, cap_pending;
  /* calls, whose function (ops[1].target) indexes callees until the end */
  int *calls, num_calls, cap_calls;
  char **callees;
  int num_callees, cap_callees;
  /* the function's .reg declarations: names, or prefixes with a count
   * (%r<45> declares %r0 .. %r44) */
  char **decl_names;
  int *decl_counts; /* -1: the name itself */
  int num_decls, cap_decls;
  /* registers by name (open addressing) */
  int *reg_slots;
  int reg_capacity;
} Parser;

static bool fail(Parser *ps, const char *format, ...) {
  if (ps->failed)
    return false;
  ps->failed = true;
  int n = snprintf(ps->err, ps->err_size, "line %d: ", ps->line);
  va_list args;
  va_start(args, format);
  if (n >= 0 && (size_t)n < ps->err_size)
    vsnprintf(ps->err + n, ps->err_size - (size_t)n, format, args);
  va_end(args);
  return false;
}

#define GROW(array, count, cap)                                                   \
  do {                                                                            \
    if ((count) == (cap)) {                                                       \
      (cap) = (cap) ? 2 * (cap) : 64;                                             \
      void *grown = realloc((array), sizeof *(array) * (size_t)(cap));            \
      if (!grown) {                                                               \
        fprintf(stderr, "ptx sim: out of memory\n");                              \
        abort();                                                                  \
      }                                                                           \
      (array) = grown;                                                            \
    }                                                                             \
  } while (0)

static uint64_t hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (uint8_t)s[i]) * 1099511628211u;
  return h;
}

static void rehash(Parser *ps);

static uint64_t reg_hash(const char *name, size_t n, int function) {
  return hash(name, n) ^ (uint64_t)function * 0x9e3779b97f4a7c15u;
}

static int intern_reg(Parser *ps, const char *name, size_t n) {
  PtxModule *m = ps->m;
  int function = m->num_entries - 1;
  if (2 * (m->num_regs + 1) > ps->reg_capacity)
    rehash(ps);
  uint64_t i = reg_hash(name, n, function) & (uint64_t)(ps->reg_capacity - 1);
  for (;; i = (i + 1) & (uint64_t)(ps->reg_capacity - 1)) {
    int r = ps->reg_slots[i];
    if (r < 0)
      break;
    if (m->reg_function[r] == function && strlen(m->reg_names[r]) == n &&
        !memcmp(m->reg_names[r], name, n))
      return r;
  }
  int cap = m->cap_regs;
  GROW(m->reg_names, m->num_regs, m->cap_regs);
  if (cap != m->cap_regs && !(m->reg_function = realloc(m->reg_function, sizeof *m->reg_function *
                                                                             (size_t)m->cap_regs)))
    abort();
  m->reg_names[m->num_regs] = strndup(name, n);
  m->reg_function[m->num_regs] = function;
  ps->reg_slots[i] = m->num_regs;
  return m->num_regs++;
}

static void rehash(Parser *ps) {
  int capacity = ps->reg_capacity ? 2 * ps->reg_capacity : 1024;
  free(ps->reg_slots);
  ps->reg_slots = malloc(sizeof *ps->reg_slots * (size_t)capacity);
  if (!ps->reg_slots)
    abort();
  for (int i = 0; i < capacity; i++)
    ps->reg_slots[i] = -1;
  ps->reg_capacity = capacity;
  for (int r = 0; r < ps->m->num_regs; r++) {
    const char *name = ps->m->reg_names[r];
    uint64_t i = reg_hash(name, strlen(name), ps->m->reg_function[r]) & (uint64_t)(capacity - 1);
    while (ps->reg_slots[i] >= 0)
      i = (i + 1) & (uint64_t)(capacity - 1);
    ps->reg_slots[i] = r;
  }
}

static int find_symbol(const PtxModule *m, const char *name, size_t n, int entry) {
  for (int i = m->num_symbols - 1; i >= 0; i--) {
    const PtxSymbol *s = &m->symbols[i];
    if (strlen(s->name) == n && !memcmp(s->name, name, n) &&
        (s->kind == SYM_GLOBAL || s->kind == SYM_SHARED || s->entry == entry))
      return i;
  }
  return -1;
}

static int add_symbol(PtxModule *m, const char *name, size_t n, SymbolKind kind, int64_t bytes) {
  GROW(m->symbols, m->num_symbols, m->cap_symbols);
  PtxSymbol *s = &m->symbols[m->num_symbols];
  *s = (PtxSymbol){.name = strndup(name, n), .kind = kind, .bytes = bytes,
                   .entry = m->num_entries - 1};
  return m->num_symbols++;
}

/* ---- types and opcode parts ---------------------------------------- */

static const struct { const char *name; PtxType type; } TYPES[] = {
    {"pred", T_PRED}, {"b8", T_B8},   {"b16", T_B16}, {"b32", T_B32},   {"b64", T_B64},
    {"u8", T_U8},     {"u16", T_U16}, {"u32", T_U32}, {"u64", T_U64},   {"s8", T_S8},
    {"s16", T_S16},   {"s32", T_S32}, {"s64", T_S64}, {"f16", T_F16},   {"bf16", T_BF16},
    {"tf32", T_TF32}, {"f32", T_F32}, {"f64", T_F64},
};

static PtxType type_named(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
    if (strlen(TYPES[i].name) == n && !memcmp(TYPES[i].name, s, n))
      return TYPES[i].type;
  return T_NONE;
}

static const struct { const char *name; PtxOp op; } OPS[] = {
    {"add", OP_ADD},     {"sub", OP_SUB},       {"mul", OP_MUL},   {"mad", OP_MAD},
    {"fma", OP_FMA},     {"div", OP_DIV},       {"rem", OP_REM},   {"abs", OP_ABS},
    {"neg", OP_NEG},     {"min", OP_MIN},       {"max", OP_MAX},   {"and", OP_AND},
    {"or", OP_OR},       {"xor", OP_XOR},       {"not", OP_NOT},   {"cnot", OP_CNOT},
    {"shl", OP_SHL},     {"shr", OP_SHR},       {"bfe", OP_BFE},   {"bfi", OP_BFI},
    {"popc", OP_POPC},   {"clz", OP_CLZ},       {"brev", OP_BREV}, {"prmt", OP_PRMT},
    {"addc", OP_ADDC},   {"subc", OP_SUBC},     {"madc", OP_MADC}, {"setp", OP_SETP},
    {"selp", OP_SELP},   {"mov", OP_MOV},       {"cvt", OP_CVT},   {"cvta", OP_CVTA},
    {"ld", OP_LD},       {"ldu", OP_LD},        {"st", OP_ST},     {"bra", OP_BRA},
    {"ret", OP_RET},     {"exit", OP_EXIT},     {"shfl", OP_SHFL}, {"bar", OP_BAR},
    {"barrier", OP_BAR}, {"mma", OP_MMA},       {"rcp", OP_RCP},   {"sqrt", OP_SQRT},
    {"rsqrt", OP_RSQRT}, {"ex2", OP_EX2},       {"lg2", OP_LG2},   {"sin", OP_SIN},
    {"cos", OP_COS},     {"tanh", OP_TANH},     {"copysign", OP_COPYSIGN},
    {"membar", OP_MEMBAR}, {"fence", OP_MEMBAR}, {"call", OP_CALL},
};

static const char *const ROUNDS[] = {"", "rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "rna"};
static const char *const COMPARES[] = {"",    "eq",  "ne",  "lt",  "le",  "gt",  "ge",
                                       "lo",  "ls",  "hi",  "hs",  "equ", "neu", "ltu",
                                       "leu", "gtu", "geu", "num", "nan"};
static const char *const SPACES[] = {"", "global", "shared", "local", "param", "const"};
static const char *const SHUFFLES[] = {"bfly", "up", "down", "idx"};
/* The parts that set Instr.flags, bit i for FLAG_NAMES[i] (F_FTZ ...). */
static const char *const FLAG_NAMES[] = {"ftz", "sat", "hi", "wide", "cc", "NaN"};
/* Parts that change nothing the simulator models ("lo" and "approx" are
 * what it computes anyway). */
static const char *const IGNORED[] = {"sync",    "aligned", "uni", "nc",  "volatile", "row",
                                      "col",     "full",    "cta", "gpu", "sys",      "relaxed",
                                      "acq_rel", "sc",      "to",  "lo",  "approx"};
#define COUNT(words) ((int)(sizeof(words) / sizeof((words)[0])))

static int find_word(const char *const *words, int count, const char *s, size_t n) {
  for (int i = 0; i < count; i++)
    if (strlen(words[i]) == n && !memcmp(words[i], s, n))
      return i;
  return -1;
}

static bool word_is(const char *s, size_t n, const char *word) {
  return strlen(word) == n && !memcmp(word, s, n);
}

static bool parse_opcode(Parser *ps, Instr *in, const char *s, size_t n) {
  const char *end = s + n, *dot = memchr(s, '.', n);
  size_t base = dot ? (size_t)(dot - s) : n;
  int op = -1;
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
    if (word_is(s, base, OPS[i].name))
      op = (int)OPS[i].op;
  if (op < 0)
    return fail(ps, "unknown instruction '%.*s'", (int)n, s);
  in->op = (uint8_t)op;
  in->bool_op = -1;
  bool comparing = op == OP_SETP;
  for (const char *part = dot; part && part < end;) {
    part++;
    const char *next = memchr(part, '.', (size_t)(end - part));
    size_t len = next ? (size_t)(next - part) : (size_t)(end - part);
    PtxType t = type_named(part, len);
    int i;
    if (t != T_NONE) {
      if (in->type == T_NONE)
        in->type = (uint8_t)t;
      else if (in->type2 == T_NONE)
        in->type2 = (uint8_t)t;
    } else if (comparing && (i = find_word(COMPARES, COUNT(COMPARES), part, len)) > 0) {
      in->compare = (uint8_t)i;
    } else if (comparing && (word_is(part, len, "and") || word_is(part, len, "or") ||
                             word_is(part, len, "xor"))) {
      in->bool_op = part[0] == 'a' ? OP_AND : part[0] == 'o' ? OP_OR : OP_XOR;
    } else if ((i = find_word(ROUNDS, COUNT(ROUNDS), part, len)) > 0) {
      in->round = (uint8_t)i;
    } else if ((i = find_word(SPACES, COUNT(SPACES), part, len)) > 0) {
      in->space = (uint8_t)i;
    } else if (op == OP_SHFL && (i = find_word(SHUFFLES, COUNT(SHUFFLES), part, len)) >= 0) {
      in->shuffle = (uint8_t)i;
    } else if (word_is(part, len, "v2") || word_is(part, len, "v4")) {
      in->vec = (uint8_t)(part[1] - '0');
    } else if ((i = find_word(FLAG_NAMES, COUNT(FLAG_NAMES), part, len)) >= 0) {
      in->flags |= (uint16_t)(1u << i);
    } else if (op == OP_MMA && (word_is(part, len, "m16n8k8") || word_is(part, len, "m16n8k16"))) {
      in->mma_k = len == 7 ? 8 : 16;
    } else if (find_word(IGNORED, COUNT(IGNORED), part, len) < 0) {
      return fail(ps, "'%.*s': the part '.%.*s' is not simulated", (int)n, s, (int)len, part);
    }
    part = next;
  }
  return true;
}

/* ---- operands ----------------------------------------------------------- */

static const char *trim(const char *s, const char **end) {
  while (s < *end && isspace((unsigned char)*s))
    s++;
  while (*end > s && isspace((unsigned char)(*end)[-1]))
    (*end)--;
  return s;
}

static bool parse_number(const char *s, size_t n, uint64_t *out) {
  char buf[64];
  if (n == 0 || n >= sizeof buf)
    return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *end;
  if (n > 2 && buf[0] == '0' && (buf[1] == 'f' || buf[1] == 'F' || buf[1] == 'd' || buf[1] == 'D'))
    *out = strtoull(buf + 2, &end, 16);
  else if (buf[0] == '-')
    *out = (uint64_t)strtoll(buf, &end, 0);
  else
    *out = strtoull(buf, &end, 0);
  if (*end == 'U' || *end == 'u')
    end++;
  return *end == '\0';
}

static const char *const SREGS[] = {"%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid"};

static bool declared(const Parser *ps, const char *s, size_t n) {
  for (int i = 0; i < ps->num_decls; i++) {
    const char *d = ps->decl_names[i];
    size_t dn = strlen(d);
    if (ps->decl_counts[i] < 0) {
      if (dn == n && !memcmp(d, s, n))
        return true;
      continue;
    }
    if (n <= dn || memcmp(d, s, dn))
      continue;
    int64_t index = 0;
    size_t k = dn;
    while (k < n && isdigit((unsigned char)s[k]) && index < 1000000)
      index = index * 10 + (s[k++] - '0');
    if (k == n && index < ps->decl_counts[i])
      return true;
  }
  return false;
}

/* ".reg .TYPE %name<N>" or ".reg .TYPE %a, %b" after "reg". */
static bool parse_reg_declaration(Parser *ps, const char *s, const char *end) {
  s = trim(s, &end);
  while (s < end && *s == '.') /* the type */
    while (s < end && !isspace((unsigned char)*s))
      s++;
  for (const char *p = s; p < end;) {
    const char *comma = memchr(p, ',', (size_t)(end - p)), *item_end = comma ? comma : end;
    const char *item = trim(p, &item_end);
    p = comma ? comma + 1 : end;
    if (item >= item_end)
      continue;
    const char *angle = memchr(item, '<', (size_t)(item_end - item));
    GROW(ps->decl_names, ps->num_decls, ps->cap_decls);
    if (!(ps->decl_counts = realloc(ps->decl_counts, sizeof *ps->decl_counts * (size_t)ps->cap_decls)))
      abort();
    ps->decl_names[ps->num_decls] = strndup(item, (size_t)((angle ? angle : item_end) - item));
    ps->decl_counts[ps->num_decls++] = angle ? atoi(angle + 1) : -1;
  }
  return true;
}

static bool parse_register(Parser *ps, const char *s, size_t n, int *reg) {
  if (word_is(s, n, "_")) {
    *reg = -1;
    return true;
  }
  if (n < 2 || s[0] != '%')
    return fail(ps, "'%.*s' is not a register", (int)n, s);
  if (!declared(ps, s, n))
    return fail(ps, "'%.*s' is neither a declared register nor a special register this "
                    "simulator knows", (int)n, s);
  *reg = intern_reg(ps, s, n);
  return true;
}

/* The function's label `name`, made (not yet placed) at its first mention. */
static int label_index(Parser *ps, const char *name, size_t n) {
  for (int i = 0; i < ps->num_labels; i++)
    if (word_is(name, n, ps->labels[i]))
      return i;
  int cap = ps->cap_labels;
  GROW(ps->labels, ps->num_labels, ps->cap_labels);
  if (cap != ps->cap_labels &&
      !(ps->label_at = realloc(ps->label_at, sizeof *ps->label_at * (size_t)ps->cap_labels)))
    abort();
  ps->labels[ps->num_labels] = strndup(name, n);
  ps->label_at[ps->num_labels] = -1;
  return ps->num_labels++;
}

static bool parse_operand(Parser *ps, Operand *o, const char *s, const char *end) {
  s = trim(s, &end);
  size_t n = (size_t)(end - s);
  o->symbol = -1;
  o->reg = -1;
  if (n == 0)
    return fail(ps, "an empty operand");
  if (*s == '{') {
    o->kind = K_VEC;
    const char *p = s + 1, *close = end - 1;
    if (*close != '}')
      return fail(ps, "'%.*s': no closing brace", (int)n, s);
    while (p < close) {
      const char *comma = memchr(p, ',', (size_t)(close - p));
      const char *item_end = comma ? comma : close;
      const char *item = trim(p, &item_end);
      if (o->count == 4)
        return fail(ps, "a vector of more than 4 registers");
      if (!parse_register(ps, item, (size_t)(item_end - item), &o->vec[o->count++]))
        return false;
      p = comma ? comma + 1 : close;
    }
    return true;
  }
  if (*s == '[') {
    o->kind = K_ADDR;
    const char *p = s + 1, *close = end - 1;
    if (*close != ']')
      return fail(ps, "'%.*s': no closing bracket", (int)n, s);
    p = trim(p, &close);
    const char *plus = memchr(p, '+', (size_t)(close - p));
    const char *base_end = plus ? plus : close;
    const char *base = trim(p, &base_end);
    size_t bn = (size_t)(base_end - base);
    uint64_t value;
    if (*base == '%') {
      if (!parse_register(ps, base, bn, &o->reg))
        return false;
    } else if (parse_number(base, bn, &value)) {
      o->offset = (int64_t)value;
    } else if ((o->symbol = find_symbol(ps->m, base, bn, ps->m->num_entries - 1)) < 0) {
      return fail(ps, "unknown symbol '%.*s'", (int)bn, base);
    }
    if (plus) {
      const char *off = plus + 1, *off_end = close;
      off = trim(off, &off_end);
      if (!parse_number(off, (size_t)(off_end - off), &value))
        return fail(ps, "bad address offset '%.*s'", (int)(off_end - off), off);
      o->offset += (int64_t)value;
    }
    return true;
  }
  if (*s == '!' && n > 1 && s[1] == '%') { /* a negated predicate */
    o->kind = K_REG;
    o->negated = true;
    return parse_register(ps, s + 1, n - 1, &o->reg);
  }
  if (*s == '%') {
    const char *dot = memchr(s, '.', n);
    size_t base = dot ? (size_t)(dot - s) : n;
    int sreg = find_word(SREGS, SR_COUNT, s, base);
    if (sreg >= 0) {
      int component = 0;
      if (dot && (size_t)(end - dot) == 2 && dot[1] >= 'x' && dot[1] <= 'z')
        component = dot[1] - 'x';
      else if (dot)
        return fail(ps, "unknown special register '%.*s'", (int)n, s);
      o->kind = K_SREG;
      o->reg = sreg * 4 + component;
      return true;
    }
    o->kind = K_REG;
    return parse_register(ps, s, n, &o->reg);
  }
  if (isdigit((unsigned char)*s) || *s == '-') {
    o->kind = K_IMM;
    if (!parse_number(s, n, &o->imm))
      return fail(ps, "bad number '%.*s'", (int)n, s);
    return true;
  }
  if ((o->symbol = find_symbol(ps->m, s, n, ps->m->num_entries - 1)) >= 0) {
    o->kind = K_SYMBOL;
    return true;
  }
  /* a label: resolved when the function ends */
  o->kind = K_LABEL;
  o->target = label_index(ps, s, n);
  return true;
}

/* Splits at top-level commas (not inside [] or {}). */
static bool parse_operands(Parser *ps, Instr *in, const char *s, const char *end) {
  int depth = 0;
  const char *start = s;
  for (const char *p = s; p <= end; p++) {
    if (p < end && (*p == '[' || *p == '{'))
      depth++;
    else if (p < end && (*p == ']' || *p == '}'))
      depth--;
    else if (p == end || (*p == ',' && depth == 0)) {
      const char *item_end = p, *item = trim(start, &item_end);
      if (item == item_end && p == end && in->nops == 0)
        return true; /* no operands */
      if (in->nops == 6)
        return fail(ps, "more than 6 operands");
      /* a second destination: setp's and shfl's '%a|%p' */
      const char *bar = memchr(item, '|', (size_t)(item_end - item));
      if (bar && in->nops == 0) {
        const char *p_start = bar + 1, *p_end = item_end;
        p_start = trim(p_start, &p_end);
        if (!parse_register(ps, p_start, (size_t)(p_end - p_start), &in->pred_out))
          return false;
        item_end = bar;
      }
      if (!parse_operand(ps, &in->ops[in->nops++], item, item_end))
        return false;
      start = p + 1;
    }
  }
  return true;
}

static int frame_symbol(Parser *ps, const char *s, const char *end) {
  s = trim(s, &end);
  int sym = find_symbol(ps->m, s, (size_t)(end - s), ps->m->num_entries - 1);
  if (sym < 0 || ps->m->symbols[sym].kind != SYM_FRAME)
    fail(ps, "'%.*s' is not a parameter variable of this function", (int)(end - s), s);
  return sym;
}

/* call[.uni] [(ret),] name[, (arg, ...)]: ops[0] the return variable
 * (K_SYMBOL, symbol -1 for none), ops[1] the callee, ops[2..] the
 * arguments. */
static bool parse_call(Parser *ps, Instr *in, const char *s, const char *end) {
  s = trim(s, &end);
  in->ops[0] = (Operand){.kind = K_SYMBOL, .symbol = -1, .reg = -1};
  if (*s == '(') {
    const char *close = memchr(s, ')', (size_t)(end - s));
    if (!close)
      return fail(ps, "a call's return without ')'");
    if ((in->ops[0].symbol = frame_symbol(ps, s + 1, close)) < 0)
      return false;
    s = memchr(close, ',', (size_t)(end - close));
    if (!s)
      return fail(ps, "a call without a function");
    s++;
  }
  const char *comma = memchr(s, ',', (size_t)(end - s)), *name_end = comma ? comma : end;
  const char *name = trim(s, &name_end);
  GROW(ps->callees, ps->num_callees, ps->cap_callees);
  ps->callees[ps->num_callees] = strndup(name, (size_t)(name_end - name));
  in->ops[1] = (Operand){.kind = K_LABEL, .target = ps->num_callees++, .reg = -1, .symbol = -1};
  in->nops = 2;
  if (comma) {
    const char *open = memchr(comma, '(', (size_t)(end - comma));
    const char *close = open ? memchr(open, ')', (size_t)(end - open)) : NULL;
    if (!close)
      return fail(ps, "a call's arguments without '(' ... ')'");
    for (const char *p = open + 1; p < close;) {
      const char *c = memchr(p, ',', (size_t)(close - p)), *arg_end = c ? c : close;
      if (in->nops == 6)
        return fail(ps, "a call with more than 4 arguments");
      int sym = frame_symbol(ps, p, arg_end);
      if (sym < 0)
        return false;
      in->ops[in->nops++] = (Operand){.kind = K_SYMBOL, .symbol = sym, .reg = -1};
      p = c ? c + 1 : close;
    }
  }
  GROW(ps->calls, ps->num_calls, ps->cap_calls);
  ps->calls[ps->num_calls++] = ps->m->num_code;
  return true;
}

static bool narrow_float(int type) { return type == T_F16 || type == T_BF16 || type == T_TF32; }
static bool wide_float(int type) { return type == T_F32 || type == T_F64; }

/* Whether the simulator gives the instruction its PTX meaning: anything
 * else (f16 arithmetic, rounding toward zero or infinity, saturating
 * integers, an mma of another shape) is refused rather than run as
 * something near it. */
static bool simulated(Parser *ps, const Instr *in) {
  for (int i = 0; i < in->nops; i++)
    if (in->ops[i].kind == K_LABEL && in->op != OP_BRA && in->op != OP_CALL)
      return fail(ps, "unknown name '%s' (not a declared variable)", ps->labels[in->ops[i].target]);
  int to = in->type, from = in->type2;
  bool rn = in->round == R_NONE || in->round == R_RN;
  switch (in->op) {
  case OP_MMA: {
    bool tf32 = from == T_TF32 && in->mma_k == 8, bf16 = from == T_BF16 && in->mma_k == 16;
    static const int counts[4] = {4, 4, 2, 4};
    bool ok = to == T_F32 && (tf32 || bf16) && in->nops == 4;
    for (int i = 0; ok && i < 4; i++) {
      ok = in->ops[i].kind == K_VEC && in->ops[i].count == counts[i];
      for (int r = 0; ok && r < in->ops[i].count; r++)
        ok = in->ops[i].vec[r] >= 0;
    }
    return ok || fail(ps, "only mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 and "
                          ".m16n8k16.row.col.f32.bf16.bf16.f32 with all their registers are simulated");
  }
  case OP_CVT: {
    bool ok;
    if (to == T_NONE || from == T_NONE)
      ok = false;
    else if (to == T_TF32)
      ok = from == T_F32 && in->round == R_RNA;
    else if (to == T_BF16)
      ok = from == T_F32 && in->round == R_RN;
    else if (from == T_BF16)
      ok = to == T_F32 && in->round == R_NONE;
    else if (narrow_float(to) || narrow_float(from))
      ok = false;
    else if (wide_float(to) && wide_float(from)) /* to the same or a wider type: integral roundings */
      ok = rn || (in->round >= R_RNI && in->round <= R_RPI && (to == from || to == T_F64));
    else if (wide_float(to)) /* from an integer */
      ok = rn && !(in->flags & F_SAT);
    else if (wide_float(from)) /* to an integer: always saturating */
      ok = in->round >= R_RNI && in->round <= R_RPI;
    else
      ok = in->round == R_NONE && !(in->flags & F_SAT);
    return ok || fail(ps, "this conversion, rounding or saturation is not simulated");
  }
  case OP_LD: case OP_ST: case OP_MOV: case OP_SELP: case OP_CVTA: case OP_BRA: case OP_CALL:
  case OP_RET: case OP_EXIT: case OP_BAR: case OP_MEMBAR: case OP_SHFL:
    return true;
  default:
    if (narrow_float(to) || narrow_float(from))
      return fail(ps, "f16, bf16 and tf32 arithmetic is not simulated");
    if (!rn)
      return fail(ps, "rounding other than .rn is not simulated");
    if ((in->flags & F_SAT) && to != T_F32)
      return fail(ps, ".sat is simulated for f32 only");
    return true;
  }
}

static bool parse_instruction(Parser *ps, const char *s, const char *end) {
  PtxModule *m = ps->m;
  GROW(m->code, m->num_code, m->cap_code);
  Instr *in = &m->code[m->num_code];
  *in = (Instr){.guard = -1, .pred_out = -1, .line = ps->line};
  s = trim(s, &end);
  if (*s == '@') {
    s++;
    in->guard_negated = *s == '!';
    s += in->guard_negated;
    const char *g = s;
    while (s < end && !isspace((unsigned char)*s))
      s++;
    if (!parse_register(ps, g, (size_t)(s - g), &in->guard))
      return false;
    s = trim(s, &end);
  }
  const char *opcode = s;
  while (s < end && !isspace((unsigned char)*s))
    s++;
  if (!parse_opcode(ps, in, opcode, (size_t)(s - opcode)))
    return false;
  if (in->op == OP_CALL ? !parse_call(ps, in, s, end) : !parse_operands(ps, in, s, end))
    return false;
  if (!simulated(ps, in))
    return false;
  if (in->op == OP_BRA) {
    if (in->nops != 1 || in->ops[0].kind != K_LABEL)
      return fail(ps, "a branch needs one label");
    GROW(ps->pending, ps->num_pending, ps->cap_pending);
    ps->pending[ps->num_pending++] = m->num_code;
  }
  m->num_code++;
  return true;
}

/* ---- declarations ---------------------------------------------------- */

/* ".align A .TYPE name[N] = {...}" after the state space word. */
static bool parse_variable(Parser *ps, SymbolKind kind, const char *s, const char *end) {
  PtxModule *m = ps->m;
  int64_t align = 0, elem = 0; /* without .align, the element's size */
  const char *p = s;
  while (p < end) {
    while (p < end && isspace((unsigned char)*p))
      p++;
    const char *w = p;
    while (p < end && !isspace((unsigned char)*p) && *p != '[' && *p != '=' && *p != ';')
      p++;
    size_t n = (size_t)(p - w);
    if (n == 0)
      break;
    if (word_is(w, n, ".align")) {
      while (p < end && isspace((unsigned char)*p))
        p++;
      align = strtoll(p, (char **)&p, 10);
      continue;
    }
    if (*w == '.') {
      PtxType t = type_named(w + 1, n - 1);
      if (t == T_NONE)
        return fail(ps, "unknown variable attribute '%.*s'", (int)n, w);
      elem = ptx_type_bytes(t);
      continue;
    }
    /* the name, then [N] and an initializer */
    int64_t count = 1;
    if (p < end && *p == '[') {
      count = strtoll(p + 1, (char **)&p, 10);
      if (p < end && *p == ']')
        p++;
    }
    if (elem == 0)
      return fail(ps, "a variable without a type");
    int64_t bytes = elem * count;
    if (align <= 0)
      align = elem;
    int sym = add_symbol(m, w, n, kind, bytes);
    PtxSymbol *v = &m->symbols[sym];
    if (kind == SYM_SHARED) {
      m->shared_bytes = (m->shared_bytes + align - 1) / align * align;
      v->offset = m->shared_bytes;
      m->shared_bytes += bytes;
    } else if (kind == SYM_FRAME) {
      m->frame_bytes = (m->frame_bytes + align - 1) / align * align;
      v->offset = m->frame_bytes;
      m->frame_bytes += bytes;
    } else if (kind == SYM_LOCAL) {
      m->local_bytes = (m->local_bytes + align - 1) / align * align;
      v->offset = m->local_bytes;
      m->local_bytes += bytes;
    } else {
      v->data = calloc((size_t)bytes + 1, 1);
      const char *init = memchr(p, '=', (size_t)(end - p));
      if (init) {
        const char *q = memchr(init, '{', (size_t)(end - init));
        q = q ? q + 1 : init + 1;
        for (int64_t i = 0; i < count && q < end; i++) {
          while (q < end && (isspace((unsigned char)*q) || *q == ','))
            q++;
          const char *num = q;
          while (q < end && *q != ',' && *q != '}' && !isspace((unsigned char)*q))
            q++;
          uint64_t value;
          if (q == num)
            break;
          if (!parse_number(num, (size_t)(q - num), &value))
            return fail(ps, "bad initializer '%.*s'", (int)(q - num), num);
          memcpy(v->data + i * elem, &value, (size_t)elem); /* little-endian */
        }
      }
    }
    return true;
  }
  return fail(ps, "a variable without a name");
}

/* ".param [.align A] .TYPE name[N]": a parameter of kind `kind`. */
static int parse_param(Parser *ps, SymbolKind kind, const char *item, const char *item_end,
                       int64_t *param_bytes) {
  const char *last = item_end;
  while (last > item && !isspace((unsigned char)last[-1]))
    last--;
  const char *bracket = memchr(last, '[', (size_t)(item_end - last));
  size_t n = (size_t)((bracket ? bracket : item_end) - last);
  int64_t size = 8, align = 0;
  for (const char *dot = item; (dot = memchr(dot + 1, '.', (size_t)(last - dot - 1))) && dot < last;) {
    const char *w_end = dot;
    while (w_end < last && !isspace((unsigned char)*w_end))
      w_end++;
    PtxType t = type_named(dot + 1, (size_t)(w_end - dot - 1));
    if (t != T_NONE)
      size = ptx_type_bytes(t);
    else if (word_is(dot, (size_t)(w_end - dot), ".align"))
      align = strtoll(w_end, NULL, 10);
  }
  if (align <= 0)
    align = size;
  if (bracket)
    size *= strtoll(bracket + 1, NULL, 10);
  int sym = add_symbol(ps->m, last, n, kind, size);
  if (kind == SYM_PARAM) {
    *param_bytes = (*param_bytes + align - 1) / align * align;
    ps->m->symbols[sym].offset = *param_bytes;
    *param_bytes += size;
  } else {
    ps->m->frame_bytes = (ps->m->frame_bytes + align - 1) / align * align;
    ps->m->symbols[sym].offset = ps->m->frame_bytes;
    ps->m->frame_bytes += size;
  }
  return sym;
}

/* ".visible .entry name(params)" or ".func [(ret)] name(params)", the
 * text before a body's '{'. */
static bool parse_entry_header(Parser *ps, const char *s, const char *end) {
  PtxModule *m = ps->m;
  const char *e = strstr(s, ".entry");
  bool device_function = !e || e >= end;
  const char *name = device_function ? strstr(s, ".func") + 5 : e + 6;
  GROW(m->entries, m->num_entries, m->cap_entries);
  PtxEntry *entry = &m->entries[m->num_entries++];
  *entry = (PtxEntry){.first = m->num_code, .frame_return = -1,
                      .device_function = device_function, .reg_first = m->num_regs};
  while (name < end && isspace((unsigned char)*name))
    name++;
  if (device_function && *name == '(') { /* the return variable */
    const char *close = memchr(name, ')', (size_t)(end - name));
    if (!close)
      return fail(ps, "a device function's return without ')'");
    int64_t unused = 0;
    entry->frame_return = parse_param(ps, SYM_FRAME, trim(name + 1, &close), close, &unused);
    name = close + 1;
  }
  const char *open = memchr(name, '(', (size_t)(end - name));
  const char *name_end = open ? open : end;
  name = trim(name, &name_end);
  entry->name = strndup(name, (size_t)(name_end - name));
  if (!open)
    return true;
  const char *close = memchr(open, ')', (size_t)(end - open));
  if (!close)
    return fail(ps, "no ')' after the parameters of %s", entry->name);
  for (const char *p = open + 1; p < close;) {
    const char *comma = memchr(p, ',', (size_t)(close - p));
    const char *item_end = comma ? comma : close, *item = trim(p, &item_end);
    p = comma ? comma + 1 : close;
    if (item == item_end)
      continue;
    if (entry->num_frame_params == 8)
      return fail(ps, "a device function with more than 8 parameters");
    if (device_function) {
      entry->frame_param[entry->num_frame_params++] =
          parse_param(ps, SYM_FRAME, item, item_end, &entry->param_bytes);
      continue;
    }
    int sym = parse_param(ps, SYM_PARAM, item, item_end, &entry->param_bytes);
    GROW(entry->params, entry->num_params, entry->cap_params);
    entry->params[entry->num_params++] = sym;
  }
  return true;
}

static bool end_function(Parser *ps) {
  PtxModule *m = ps->m;
  PtxEntry *e = &m->entries[m->num_entries - 1];
  e->end = m->num_code;
  e->reg_end = m->num_regs;
  e->shared_first = m->shared_bytes;
  for (int i = e->first; i < e->end; i++) /* the shared variables it names */
    for (int o = 0; o < m->code[i].nops; o++) {
      int sym = m->code[i].ops[o].symbol;
      if (sym >= 0 && m->symbols[sym].kind == SYM_SHARED) {
        const PtxSymbol *v = &m->symbols[sym];
        e->shared_first = v->offset < e->shared_first ? v->offset : e->shared_first;
        e->shared_end = v->offset + v->bytes > e->shared_end ? v->offset + v->bytes : e->shared_end;
      }
    }
  for (int i = 0; i < ps->num_decls; i++)
    free(ps->decl_names[i]);
  ps->num_decls = 0;
  for (int i = 0; i < ps->num_pending; i++) {
    Instr *in = &m->code[ps->pending[i]];
    int label = in->ops[0].target;
    if (ps->label_at[label] < 0) {
      ps->line = in->line;
      return fail(ps, "branch to an undefined label '%s'", ps->labels[label]);
    }
    in->ops[0].target = ps->label_at[label];
  }
  for (int i = 0; i < ps->num_labels; i++)
    free(ps->labels[i]);
  ps->num_labels = ps->num_pending = 0;
  return true;
}

/* ---- statements ------------------------------------------------------ */

static void skip_space(Parser *ps) {
  for (;;) {
    while (*ps->p && isspace((unsigned char)*ps->p))
      ps->line += *ps->p++ == '\n';
    if (ps->p[0] == '/' && ps->p[1] == '/') {
      while (*ps->p && *ps->p != '\n')
        ps->p++;
    } else if (ps->p[0] == '/' && ps->p[1] == '*') {
      const char *close = strstr(ps->p + 2, "*/");
      for (const char *q = ps->p; q < (close ? close : ps->p + strlen(ps->p)); q++)
        ps->line += *q == '\n';
      ps->p = close ? close + 2 : ps->p + strlen(ps->p);
    } else {
      return;
    }
  }
}

/* The statement at ps->p up to its ';' (braces inside it included), or up
 * to a '{' that opens a function body (*opens set). */
static const char *statement_end(Parser *ps, bool *opens) {
  int depth = 0;
  *opens = false;
  bool header = false;
  for (const char *q = ps->p; *q; q++) {
    if (q[0] == '/' && q[1] == '/') {
      while (*q && *q != '\n')
        q++;
      if (!*q)
        break;
    }
    if (*q == '.' && (!strncmp(q, ".entry", 6) || !strncmp(q, ".func", 5)))
      header = true;
    if (*q == '{' && header && depth == 0) {
      *opens = true;
      return q;
    }
    if (*q == '{')
      depth++;
    else if (*q == '}')
      depth--;
    else if (*q == ';' && depth == 0)
      return q;
  }
  return NULL;
}

static void count_lines(Parser *ps, const char *to) {
  for (const char *q = ps->p; q < to; q++)
    ps->line += *q == '\n';
  ps->p = to;
}

static bool parse_module(Parser *ps) {
  int depth = 0; /* braces inside the current function */
  for (;;) {
    skip_space(ps);
    if (!*ps->p)
      break;
    if (depth > 0 && (*ps->p == '{' || *ps->p == '}')) {
      depth += *ps->p == '{' ? 1 : -1;
      ps->p++;
      if (depth == 0 && !end_function(ps))
        return false;
      continue;
    }
    if (depth > 0) { /* a label? */
      const char *q = ps->p;
      while (isalnum((unsigned char)*q) || *q == '_' || *q == '$' || *q == '.')
        q++;
      if (*q == ':' && q > ps->p) {
        int label = label_index(ps, ps->p, (size_t)(q - ps->p)); /* may move label_at */
        ps->label_at[label] = ps->m->num_code;
        ps->p = q + 1;
        continue;
      }
    }
    if (!strncmp(ps->p, ".version", 8) || !strncmp(ps->p, ".target", 7) ||
        !strncmp(ps->p, ".address_size", 13)) { /* these end at the line's end, with no ';' */
      const char *eol = strchr(ps->p, '\n');
      ps->p = eol ? eol : ps->p + strlen(ps->p);
      continue;
    }
    bool opens;
    const char *end = statement_end(ps, &opens);
    if (!end)
      return fail(ps, "a statement without its ';'");
    const char *s = ps->p;
    bool ok = true;
    if (opens) {
      ok = parse_entry_header(ps, s, end);
      depth = 1;
    } else if (*s == '.') {
      const char *w = s + 1;
      size_t n = strcspn(w, " \t\n;");
      if (word_is(w, n, "global") || word_is(w, n, "const"))
        ok = parse_variable(ps, SYM_GLOBAL, w + n, end);
      else if (word_is(w, n, "shared"))
        ok = parse_variable(ps, SYM_SHARED, w + n, end);
      else if (word_is(w, n, "local") && depth > 0)
        ok = parse_variable(ps, SYM_LOCAL, w + n, end);
      else if (word_is(w, n, "param") && depth > 0) /* a call's argument or return */
        ok = parse_variable(ps, SYM_FRAME, w + n, end);
      else if (depth == 0 && strstr(s, ".func") && strstr(s, ".func") < end)
        ; /* a device function's declaration: calls find its definition */
      else if (word_is(w, n, "reg") && depth > 0)
        ok = parse_reg_declaration(ps, w + n, end);
      else if (!word_is(w, n, "pragma") && !word_is(w, n, "maxntid") &&
               !word_is(w, n, "reqntid") && !word_is(w, n, "minnctapersm"))
        ok = fail(ps, "the directive '.%.*s' is not simulated", (int)n, w);
    } else if (depth > 0) {
      ok = parse_instruction(ps, s, end);
    } else {
      ok = fail(ps, "an instruction outside a function");
    }
    count_lines(ps, end + 1);
    if (!ok)
      return false;
  }
  if (depth != 0)
    return fail(ps, "the file ends inside a function");
  for (int i = 0; i < ps->num_calls; i++) {
    Instr *in = &ps->m->code[ps->calls[i]];
    const char *name = ps->callees[in->ops[1].target];
    int found = -1;
    for (int f = 0; f < ps->m->num_entries; f++)
      if (ps->m->entries[f].device_function && !strcmp(ps->m->entries[f].name, name))
        found = f;
    ps->line = in->line;
    if (found < 0)
      return fail(ps, "a call to '%s', which is not defined here", name);
    const PtxEntry *callee = &ps->m->entries[found];
    if (in->nops - 2 != callee->num_frame_params || (in->ops[0].symbol >= 0) != (callee->frame_return >= 0))
      return fail(ps, "a call to '%s' with other parameters than it declares", name);
    in->ops[1].target = found;
  }
  return true;
}

PtxModule *ptx_sim_parse(const char *text, char *err, size_t err_size) {
  PtxModule *m = calloc(1, sizeof *m);
  Parser ps = {.m = m, .p = text, .line = 1, .err = err, .err_size = err_size};
  bool ok = m && parse_module(&ps);
  for (int i = 0; i < ps.num_labels; i++)
    free(ps.labels[i]);
  free(ps.labels);
  free(ps.label_at);
  free(ps.pending);
  free(ps.reg_slots);
  free(ps.calls);
  for (int i = 0; i < ps.num_decls; i++)
    free(ps.decl_names[i]);
  free(ps.decl_names);
  free(ps.decl_counts);
  for (int i = 0; i < ps.num_callees; i++)
    free(ps.callees[i]);
  free(ps.callees);
  if (!ok) {
    ptx_sim_free(m);
    return NULL;
  }
  for (int i = 0; i < m->num_entries; i++)
    m->entries[i].module = m;
  return m;
}

void ptx_sim_free(PtxModule *m) {
  if (!m)
    return;
  for (int i = 0; i < m->num_entries; i++) {
    free(m->entries[i].name);
    free(m->entries[i].params);
  }
  for (int i = 0; i < m->num_symbols; i++) {
    free(m->symbols[i].name);
    free(m->symbols[i].data);
  }
  for (int i = 0; i < m->num_regs; i++)
    free(m->reg_names[i]);
  free(m->reg_names);
  free(m->reg_function);
  free(m->entries);
  free(m->symbols);
  free(m->code);
  free(m);
}

const PtxEntry *ptx_sim_entry(const PtxModule *m, const char *name) {
  for (int i = 0; i < m->num_entries; i++)
    if (!m->entries[i].device_function && !strcmp(m->entries[i].name, name))
      return &m->entries[i];
  return NULL;
}
