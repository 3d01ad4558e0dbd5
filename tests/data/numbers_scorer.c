/* numbers_score: exact match of token sequences, line by line; exit status 2
 * and no accuracy on unusable input. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *scorer;
static char ref[512], hyp[512], out[512];

/* Runs the scorer on the given files' contents; returns its exit status. */
static int score(const char *ref_text, const char *hyp_text, char *printed, size_t size) {
  CHECK(write_file(ref, ref_text, strlen(ref_text)) == 0);
  CHECK(write_file(hyp, hyp_text, strlen(hyp_text)) == 0);
  char command[2048];
  snprintf(command, sizeof command, "'%s' '%s' '%s' > '%s' 2>&1", scorer, ref, hyp, out);
  int status = system(command);
  size_t length;
  unsigned char *text = read_file(out, &length);
  snprintf(printed, size, "%.*s", text ? (int)length : 0, text ? (const char *)text : "");
  free(text);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s NUMBERS_SCORE\n", argv[0]);
    return 2;
  }
  scorer = argv[1];
  scratch_path(ref, sizeof ref, "ref.tsv");
  scratch_path(hyp, sizeof hyp, "hyp.txt");
  scratch_path(out, sizeof out, "out.txt");
  static const char reference[] = "three hundred twelve\t3 1 2\nseven\t7\n"
                                  "forty thousand and seven\t4 0 0 0 7\nzero\t0\n";
  char printed[512];
  /* Right, right with other spacing, wrong (a missing digit), right without a final newline. */
  CHECK(score(reference, "3 1 2\n  7 \n4 0 0 7\n0", printed, sizeof printed) == 0);
  CHECK(strcmp(printed, "accuracy 0.7500 (3/4)\n") == 0);
  CHECK(score(reference, "3 1 2\n7\n4 0 0 0 7\n0\n", printed, sizeof printed) == 0);
  CHECK(strcmp(printed, "accuracy 1.0000 (4/4)\n") == 0);
  CHECK(score(reference, "3 1\n7 7\n\n0 0\n", printed, sizeof printed) == 0);
  CHECK(strcmp(printed, "accuracy 0.0000 (0/4)\n") == 0);

  CHECK(score(reference, "3 1 2\n7\n4 0 0 0 7\n", printed, sizeof printed) == 2);
  CHECK(strstr(printed, "has 3 lines, fewer than") != NULL);
  CHECK(score(reference, "3 1 2\n7\n4 0 0 0 7\n0\n1\n", printed, sizeof printed) == 2);
  CHECK(strstr(printed, "has more lines than the 4 of") != NULL);
  CHECK(score("seven 7\n", "7\n", printed, sizeof printed) == 2);
  CHECK(strstr(printed, ":1: no tab before the target") != NULL);
  CHECK(score("", "", printed, sizeof printed) == 2);
  CHECK(strstr(printed, "is empty") != NULL);
  scratch_dir_remove();
  return check_result("examples.numbers_scorer");
}
