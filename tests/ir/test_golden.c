/* Pass golden tests: `ir_golden NAME.in` parses the graph in NAME.in, runs
 * the passes its first line names ("# passes: simplify dce") and compares
 * the printed result with NAME.out byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_text.h"
#include "pass.h"
#include "testutil.h"

typedef Graph *(*Pass)(const Graph *in, char *err, size_t err_size);

static Graph *merge_dots(const Graph *in, char *err, size_t err_size) {
  return pass_merge_dots(in, NULL, err, err_size);
}

static Pass pass_named(const char *name) {
  if (strcmp(name, "merge_dots") == 0) return merge_dots;
  if (strcmp(name, "fold") == 0) return pass_fold;
  if (strcmp(name, "simplify") == 0) return pass_simplify;
  if (strcmp(name, "cse") == 0) return pass_cse;
  if (strcmp(name, "dce") == 0) return pass_dce;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: ir_golden FILE.in\n");
    return 2;
  }
  const char *in_path = argv[1];
  size_t length = strlen(in_path);
  if (length < 3 || strcmp(in_path + length - 3, ".in") != 0) {
    fprintf(stderr, "%s: expected a .in file\n", in_path);
    return 2;
  }
  char *out_path = malloc(length + 2);
  memcpy(out_path, in_path, length - 3);
  strcpy(out_path + length - 3, ".out");
  char *input = test_read_file(in_path), *expected = test_read_file(out_path);
  if (!CHECK(input && expected)) fprintf(stderr, "cannot read %s or %s\n", in_path, out_path);

  const char *header = "# passes:";
  Graph *g = NULL;
  if (input && expected && CHECK(strncmp(input, header, strlen(header)) == 0)) g = test_parse(input);
  if (g) {
    const char *p = input + strlen(header);
    char name[32];
    int used;
    while (g && sscanf(p, " %31[a-z_]%n", name, &used) == 1) {
      p += used;
      Pass pass = pass_named(name);
      char err[256];
      Graph *next = pass ? pass(g, err, sizeof err) : NULL;
      if (!CHECK(next != NULL)) fprintf(stderr, "pass '%s': %s\n", name, pass ? err : "unknown");
      graph_free(g);
      g = next;
    }
  }
  if (g) {
    char *actual = graph_to_text(g);
    if (!CHECK(actual && strcmp(actual, expected) == 0))
      fprintf(stderr, "--- %s\n%s--- actual\n%s", out_path, expected, actual ? actual : "");
    free(actual);
    graph_free(g);
  }
  free(input);
  free(expected);
  free(out_path);
  return test_finish(in_path);
}
