/* The parsed form of a PTX module that ptx_parse.c builds and ptx_exec.c
 * runs. Registers of every function share one numbering by name (a thread
 * runs one entry); operands are resolved to register numbers, immediates,
 * symbols and branch targets once, at parse time. */
#ifndef TFM_PTX_SIM_INTERNAL_H
#define TFM_PTX_SIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ptx_sim.h"

typedef enum {
  T_NONE, T_PRED,
  T_B8, T_B16, T_B32, T_B64,
  T_U8, T_U16, T_U32, T_U64,
  T_S8, T_S16, T_S32, T_S64,
  T_F16, T_BF16, T_TF32, T_F32, T_F64,
} PtxType;

typedef enum {
  OP_ADD, OP_SUB, OP_MUL, OP_MAD, OP_FMA, OP_DIV, OP_REM, OP_ABS, OP_NEG, OP_MIN, OP_MAX,
  OP_AND, OP_OR, OP_XOR, OP_NOT, OP_CNOT, OP_SHL, OP_SHR, OP_BFE, OP_BFI, OP_POPC, OP_CLZ,
  OP_BREV, OP_PRMT, OP_ADDC, OP_SUBC, OP_MADC, OP_SETP, OP_SELP, OP_MOV, OP_CVT, OP_CVTA,
  OP_LD, OP_ST, OP_BRA, OP_RET, OP_EXIT, OP_SHFL, OP_BAR, OP_MMA, OP_RCP, OP_SQRT, OP_RSQRT,
  OP_EX2, OP_LG2, OP_SIN, OP_COS, OP_TANH, OP_COPYSIGN, OP_TESTP, OP_MEMBAR, OP_CALL,
} PtxOp;

/* Rounding of cvt, cvt's integer roundings, and setp's comparisons. */
typedef enum { R_NONE, R_RN, R_RZ, R_RM, R_RP, R_RNI, R_RZI, R_RMI, R_RPI, R_RNA } PtxRound;
typedef enum {
  C_NONE, C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, C_LO, C_LS, C_HI, C_HS,
  C_EQU, C_NEU, C_LTU, C_LEU, C_GTU, C_GEU, C_NUM, C_NAN,
} PtxCompare;
typedef enum { S_GENERIC, S_GLOBAL, S_SHARED, S_LOCAL, S_PARAM, S_CONST } PtxSpace;
typedef enum { SH_BFLY, SH_UP, SH_DOWN, SH_IDX } PtxShuffle;

/* Instr.flags, in the order of ptx_parse.c's FLAG_NAMES. */
enum { F_FTZ = 1, F_SAT = 2, F_HI = 4, F_WIDE = 8, F_CC = 16, F_NAN = 32 };

typedef enum { K_NONE, K_REG, K_IMM, K_ADDR, K_VEC, K_SYMBOL, K_SREG, K_LABEL } OperandKind;

/* Special registers: index into a thread's sreg values. */
enum { SR_TID, SR_NTID, SR_CTAID, SR_NCTAID, SR_LANEID, SR_WARPID, SR_COUNT };

/* Symbols: module-level .global/.const/.shared variables, a function's
 * .local variables (each its own offset in every thread's local memory),
 * an entry's parameters, and the parameters a thread passes
 * and receives in a call (a device function's, the caller's argument and
 * return variables: each has its own offset in every thread's frame, as
 * nothing recurses). */
typedef enum { SYM_GLOBAL, SYM_SHARED, SYM_LOCAL, SYM_PARAM, SYM_FRAME } SymbolKind;
typedef struct PtxSymbol {
  char *name;
  SymbolKind kind;
  int64_t bytes;
  int64_t offset;    /* SHARED: into the block's shared memory; PARAM: into the parameters;
                      * FRAME, LOCAL: into the thread's frame, its local memory */
  uint8_t *data;     /* GLOBAL: its storage */
  int entry;         /* LOCAL, PARAM: the function declaring it */
} PtxSymbol;

typedef struct Operand {
  uint8_t kind;
  int reg;          /* K_REG, K_ADDR base (-1: a symbol or absolute), K_SREG index */
  int symbol;       /* K_ADDR / K_SYMBOL: symbol index, else -1 */
  int64_t offset;   /* K_ADDR */
  bool negated;     /* K_REG: a predicate read as its negation ('!%p') */
  uint64_t imm;     /* K_IMM: the bits (0f... and 0d... floats kept as bits) */
  int count;        /* K_VEC */
  int vec[4];       /* K_VEC: register numbers (-1: the sink '_') */
  int target;       /* K_LABEL: instruction index; call's operand 1: the function */
} Operand;

typedef struct Instr {
  uint8_t op, type, type2, round, compare, space, vec, shuffle;
  uint8_t mma_k;    /* mma: the shape's k (8: m16n8k8, 16: m16n8k16) */
  uint16_t flags;
  int guard;        /* predicate register, -1 for none */
  bool guard_negated;
  int pred_out;     /* setp/shfl's second destination '|%p', -1 for none */
  int bool_op;      /* setp.CMP.and/or/xor: the combining op (OP_AND...), -1 none */
  int nops;
  Operand ops[6];
  int line;         /* in the PTX text */
} Instr;

/* An entry, or a device function (.func) that calls reach: its
 * parameters and return variable are then FRAME symbols. */
struct PtxEntry {
  char *name;
  const PtxModule *module;
  bool device_function;
  int num_frame_params;
  int frame_param[8];  /* device function: its parameter symbols, in order */
  int frame_return;    /* device function: its return variable, -1 for none */
  int first, end;     /* instructions [first, end) */
  int num_params;
  int64_t param_bytes;
  int *params;         /* an entry's parameter symbols, in order */
  int cap_params;
  int reg_first, reg_end; /* its registers: [reg_first, reg_end) */
  int64_t shared_first, shared_end; /* the shared memory its instructions name */
};

struct PtxModule {
  Instr *code;
  int num_code, cap_code;
  PtxEntry *entries;
  int num_entries, cap_entries;
  PtxSymbol *symbols;
  int num_symbols, cap_symbols;
  int64_t shared_bytes;   /* all module-level .shared variables */
  int64_t frame_bytes;    /* every FRAME symbol, a thread's */
  int64_t local_bytes;    /* every LOCAL symbol, a thread's */
  int num_regs;           /* registers are numbered per function and name */
  char **reg_names;
  int *reg_function;
  int cap_regs;
};

static inline int ptx_type_bytes(int type) {
  switch (type) {
  case T_B8: case T_U8: case T_S8: case T_PRED: return 1;
  case T_B16: case T_U16: case T_S16: case T_F16: case T_BF16: return 2;
  case T_B64: case T_U64: case T_S64: case T_F64: return 8;
  default: return 4;
  }
}

#endif
