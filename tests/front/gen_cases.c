/* Writes the front-end cases that are too large or too binary for git, each
 * with a CASE.tfm.expect file in run_case.sh's format.
 * usage: front_gen_cases OUTDIR */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *outdir;

static FILE *open_case(const char *name, const char *suffix) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.tfm%s", outdir, name, suffix);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "front_gen_cases: cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
  return f;
}

static void expect(const char *name, const char *text) {
  FILE *f = open_case(name, ".expect");
  fputs(text, f);
  fclose(f);
}

static void repeat(FILE *f, const char *s, int n) {
  for (int i = 0; i < n; i++) fputs(s, f);
}

/* A model whose one statement is `let x = <prefix>^n core <suffix>^n`. */
static void nested(const char *name, const char *prefix, const char *core, const char *suffix,
                   int n, const char *expectation) {
  FILE *f = open_case(name, "");
  fputs("model m {\n  let x = ", f);
  repeat(f, prefix, n);
  fputs(core, f);
  repeat(f, suffix, n);
  fputs("\n}\n", f);
  fclose(f);
  expect(name, expectation);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: front_gen_cases OUTDIR\n");
    return 2;
  }
  outdir = argv[1];
  mkdir(outdir, 0777);

  /* 64 KiB of pseudo-random bytes (fixed seed) after a control byte, so the
   * first diagnostic is known; the rest must stop at the error limit. */
  FILE *f = open_case("garbage", "");
  fputc(0x01, f);
  unsigned x = 12345;
  for (int i = 0; i < 65536; i++) {
    x = x * 1103515245u + 12345u;
    fputc((int)(x >> 16) & 0xff, f);
  }
  fclose(f);
  expect("garbage",
         "# expect: 1:1: error: unexpected byte 0x01 (tfm programs are text; non-ASCII is "
         "allowed only in comments and strings)\n"
         "# expect: tfmc: too many errors (20), stopping\n"
         "# errors: any\n");

  f = open_case("nul_byte", "");
  fputs("model m {\n  let x = 1", f);
  fputc(0, f);
  fputs("\n}\n", f);
  fclose(f);
  expect("nul_byte",
         "# expect: 2:12: error: unexpected byte 0x00 (tfm programs are text; non-ASCII is "
         "allowed only in comments and strings)\n");

  /* 10 MB: 100,000 statements with comments, then one error on the last line. */
  f = open_case("huge_file", "");
  fputs("model m {\n", f);
  int lines = 100000;
  for (int i = 0; i < lines; i++)
    fprintf(f, "  let v%06d = %d  # padding padding padding padding padding padding padding pad\n",
            i, i);
  fputs("  let z = undefined_name\n}\n", f);
  fclose(f);
  char buf[256];
  snprintf(buf, sizeof buf, "# expect: %d:11: error: unknown name 'undefined_name'\n", lines + 2);
  expect("huge_file", buf);

  /* One 1 MB line: a left-leaning sum far deeper than the tree limit. */
  f = open_case("long_line", "");
  fputs("model m {\n  let x = 1", f);
  repeat(f, " + 1", 250000);
  fputs("\n}\n", f);
  fclose(f);
  expect("long_line",
         "# expect-re: ^long_line\\.tfm:2:[0-9]+: error: program is nested too deeply "
         "\\(more than 256 levels\\)\n");

  /* 10,000 levels of nesting of each kind: parentheses add no tree depth
   * (the name inside is then simply unknown); the rest are refused. */
  nested("deep_parens", "(", "undefined_name", ")", 10000,
         "# expect: 2:10011: error: unknown name 'undefined_name'\n");
  const char *too_deep =
      "# expect-re: ^%s\\.tfm:2:[0-9]+: error: program is nested too deeply \\(more than 256 "
      "levels\\)\n";
  const char *kinds[][4] = {{"deep_calls", "f(", "1", ")"},
                            {"deep_unary", "-", "1", ""},
                            {"deep_lists", "[", "1", "]"},
                            {"deep_sum", "1 + (", "1", ")"}};
  for (int i = 0; i < 4; i++) {
    snprintf(buf, sizeof buf, too_deep, kinds[i][0]);
    if (i == 0) /* the outer calls are still checked, and f is not defined */
      strcat(buf, "# expect: 2:11: error: unknown name 'f'\n");
    nested(kinds[i][0], kinds[i][1], kinds[i][2], kinds[i][3], 10000, buf);
  }

  f = open_case("deep_blocks", "");
  fputs("model m {\n", f);
  repeat(f, "if true {\n", 10000);
  repeat(f, "}\n", 10000);
  fputs("}\n", f);
  fclose(f);
  expect("deep_blocks",
         "# expect-re: ^deep_blocks\\.tfm:[0-9]+:[0-9]+: error: program is nested too deeply "
         "\\(more than 256 levels\\)\n");
  return 0;
}
