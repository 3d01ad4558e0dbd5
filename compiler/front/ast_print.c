/* The tree as an indented outline, one node per line (tfmc emit ast). */
#include <inttypes.h>

#include "ast.h"

static void print_node(const Node *n, FILE *out, int indent);

static void print_list(const PtrVec *list, FILE *out, int indent) {
  for (int i = 0; i < list->len; i++) print_node(list->items[i], out, indent);
}

static void print_node(const Node *n, FILE *out, int indent) {
  if (!n) return;
  fprintf(out, "%*s%s", indent * 2, "", node_kind_name(n->kind));
  switch (n->kind) {
    case N_INT: fprintf(out, " %" PRId64, n->ival); break;
    case N_FLOAT: fprintf(out, " %.17g", n->fval); break;
    case N_STRING: case N_IMPORT: fprintf(out, " \"%s\"", n->sval); break;
    case N_BOOL: fprintf(out, " %s", n->ival ? "true" : "false"); break;
    case N_UNARY: case N_BINARY: fprintf(out, " %s", op_text(n->op)); break;
    default: break;
  }
  if (n->name) fprintf(out, " %s", n->name);
  fprintf(out, "  @%d:%d\n", n->span.line, n->span.col);
  print_list(&n->params, out, indent + 1);
  if (n->t) {
    fprintf(out, "%*s:type\n", (indent + 1) * 2, "");
    print_node(n->t, out, indent + 2);
  }
  print_node(n->a, out, indent + 1);
  print_node(n->b, out, indent + 1);
  print_node(n->c, out, indent + 1);
  print_list(&n->list, out, indent + 1);
}

void ast_print(const Node *n, FILE *out) { print_node(n, out, 0); }
