/* What the built-ins' files share (builtins.c; builtins_source.c: the
 * source() of pretrained blocks; builtins_decode.c: the decode-step
 * graph's). */
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
/* A tensor argument (NULL after reporting what it is instead). */
const Value *builtin_tensor_arg(const Arg *a, const char *fname, const char *what);
/* A tensor result and its graph node (GRAPH_NONE when only checking). */
Value *builtin_lowered(const TensorType *t, int32_t node);
Value *builtin_source(Ctx *ctx, const Node *call, Arg *args, int nargs);
/* builtins_decode.c: decode_pos(), kv_cache(), and the value of `decoding`. */
Value *builtin_decode_pos(const Node *call, Arg *args, int nargs);
Value *builtin_kv_cache(const Node *call, Arg *args, int nargs);
int builtins_decoding(void);

#endif
