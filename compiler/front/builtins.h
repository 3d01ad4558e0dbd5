/* The language's built-in names (builtins.c). */
#ifndef TFM_BUILTINS_H
#define TFM_BUILTINS_H
#include "scope.h"

/* Looks up a built-in name (functions, dtypes, initialisers, constants). */
Value *builtin_lookup(const char *name);
Value *builtin_call(Ctx *ctx, const Value *fn, const Node *call, Arg *args, int nargs);
const char *builtin_name(int id);
/* The value of the built-in `training` in the programs checked next
 * (FrontOptions.training; 1 until set). */
void builtins_set_training(int training);

#endif
