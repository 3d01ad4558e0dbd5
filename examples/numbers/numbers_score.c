/* numbers_score REF.tsv HYP.txt
 *
 * Exact-match accuracy of translations: line i of HYP.txt against the target
 * (after the tab) of line i of REF.tsv, compared as token sequences, so only
 * the spacing may differ. Prints "accuracy 0.9870 (987/1000)"; exits 2 on
 * unusable input (unreadable files, a line without a tab, differing counts). */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Skips blanks; returns the length of the token starting at *text. */
static size_t next_token(const char **text) {
  while (is_blank(**text)) ++*text;
  size_t length = 0;
  while ((*text)[length] && !is_blank((*text)[length])) length++;
  return length;
}

static bool same_tokens(const char *a, const char *b) {
  for (;;) {
    size_t length_a = next_token(&a), length_b = next_token(&b);
    if (length_a != length_b || memcmp(a, b, length_a) != 0) return false;
    if (length_a == 0) return true;
    a += length_a;
    b += length_b;
  }
}

static FILE *open_or_complain(const char *path) {
  FILE *file = fopen(path, "r");
  if (!file) perror(path);
  return file;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: numbers_score REF.tsv HYP.txt\n");
    return 2;
  }
  FILE *ref = open_or_complain(argv[1]), *hyp = open_or_complain(argv[2]);
  char *ref_line = NULL, *hyp_line = NULL;
  size_t ref_size = 0, hyp_size = 0, lines = 0, correct = 0;
  int status = ref && hyp ? 0 : 2;
  while (status == 0 && getline(&ref_line, &ref_size, ref) >= 0) {
    lines++;
    char *tab = strchr(ref_line, '\t');
    if (!tab) {
      fprintf(stderr, "numbers_score: %s:%zu: no tab before the target\n", argv[1], lines);
      status = 2;
    } else if (getline(&hyp_line, &hyp_size, hyp) < 0) {
      fprintf(stderr, "numbers_score: %s has %zu lines, fewer than %s\n", argv[2], lines - 1,
              argv[1]);
      status = 2;
    } else {
      correct += same_tokens(tab + 1, hyp_line);
    }
  }
  if (status == 0 && getline(&hyp_line, &hyp_size, hyp) >= 0) {
    fprintf(stderr, "numbers_score: %s has more lines than the %zu of %s\n", argv[2], lines,
            argv[1]);
    status = 2;
  }
  if (status == 0 && lines == 0) {
    fprintf(stderr, "numbers_score: %s is empty\n", argv[1]);
    status = 2;
  }
  if (status == 0)
    printf("accuracy %.4f (%zu/%zu)\n", (double)correct / (double)lines, correct, lines);
  free(ref_line);
  free(hyp_line);
  if (ref) fclose(ref);
  if (hyp) fclose(hyp);
  return status;
}
