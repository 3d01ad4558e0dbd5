/* What the built-ins' files share (builtins.c; builtins_source.c: the
 * source() of pretrained blocks). */
#ifndef TFM_BUILTINS_INTERNAL_H
#define TFM_BUILTINS_INTERNAL_H
#include "scope.h"

/* The call's arguments by parameter ("a b ?c": c optional) into out;
 * reports what is missing, unknown or given twice. */
int builtin_get_args(const Node *call, const char *fname, const char *params, Arg *args, int nargs,
                     Arg **out);
int builtin_dtype_arg(const Arg *a, const char *fname, DType *out);
/* A tensor value of the shape the list argument gives (its node unset). */
Value *builtin_shaped(const Node *call, const char *fname, Arg *shape, DType dt);
Value *builtin_source(Ctx *ctx, const Node *call, Arg *args, int nargs);

#endif
