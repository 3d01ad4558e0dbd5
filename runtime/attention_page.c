/* The attention page (attention_page.h): the template with its data block,
 * a JSON object of the sequences and the maps, filled in. */
#define _POSIX_C_SOURCE 200809L
#include "attention_page.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "tfmrt.h"

extern const char tfm_attention_page_template[]; /* attention_page.html */

static const tfm_page_sequence *find_sequence(const tfm_attention_page *p, const char *name) {
  for (size_t i = 0; i < p->num_sequences; i++)
    if (!strcmp(p->sequences[i].name, name)) return &p->sequences[i];
  return NULL;
}

static void write_text(FILE *f, const char *text) {
  json_write_string(f, text ? text : "", text ? strlen(text) : 0);
}

/* `head` (e.g. "{\"name\":" or ",\"keys\":") and a string member's value. */
static void write_member(FILE *f, const char *head, const char *text) {
  fputs(head, f);
  write_text(f, text);
}

static void write_map(FILE *f, const tfm_attention_map *m, size_t rows, size_t cols) {
  write_member(f, "{\"name\":", m->name);
  write_member(f, ",\"queries\":", m->queries);
  write_member(f, ",\"keys\":", m->keys);
  fputs(",\"weights\":[", f);
  for (size_t h = 0; h < m->heads; h++) {
    fputs(h ? ",[" : "[", f);
    for (size_t q = 0; q < rows; q++) {
      fputs(q ? ",[" : "[", f);
      const float *row = m->weights + h * m->head_stride + q * m->row_stride;
      for (size_t k = 0; k < cols; k++) {
        if (k) fputc(',', f);
        if (isfinite(row[k])) fprintf(f, "%.5g", (double)row[k]);
        else fputs("null", f); /* JSON has no NaN; the page shows it as 0 */
      }
      fputc(']', f);
    }
    fputc(']', f);
  }
  fputs("]}", f);
}

static int write_data(FILE *f, const tfm_attention_page *p) {
  write_member(f, "{\"title\":", p->title);
  write_member(f, ",\"subtitle\":", p->subtitle);
  fputs(",\"sequences\":{", f);
  for (size_t i = 0; i < p->num_sequences; i++) {
    const tfm_page_sequence *s = &p->sequences[i];
    if (i) fputc(',', f);
    write_text(f, s->name);
    fputs(":[", f);
    for (size_t t = 0; t < s->count; t++) {
      if (t) fputc(',', f);
      json_write_string(f, s->tokens[t], s->lengths[t]);
    }
    fputc(']', f);
  }
  fputs("},\"maps\":[", f);
  for (size_t i = 0; i < p->num_maps; i++) {
    const tfm_attention_map *m = &p->maps[i];
    const tfm_page_sequence *q = find_sequence(p, m->queries), *k = find_sequence(p, m->keys);
    if (!q || !k || !m->heads)
      return tfm_fail("attention page: map %s names a sequence the page lacks, or has no heads",
                      m->name);
    if (i) fputc(',', f);
    write_map(f, m, q->count, k->count);
  }
  fputs("]", f);
  if (p->values) {
    fputs(",\"values\":[", f);
    for (size_t i = 0; i < p->num_values; i++) fprintf(f, i ? ",%.10g" : "%.10g", p->values[i]);
    fputs("]", f);
  }
  fprintf(f, ",\"select\":{\"map\":%zu,\"query\":%zu,\"head\":", p->select_map, p->select_query);
  if (p->select_head < 0) fputs("null}}", f);
  else fprintf(f, "%ld}}", p->select_head);
  return TFM_OK;
}

int tfm_attention_page_write(const tfm_attention_page *p, const char *path) {
  if (!p->num_maps) return tfm_fail("attention page: no weights to show");
  const char *slot = strstr(tfm_attention_page_template, "@DATA@");
  if (!slot) return tfm_fail("attention page: the template has no @DATA@ slot");
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return tfm_fail("%s: path too long", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return tfm_fail("%s: cannot write it", tmp);
  fwrite(tfm_attention_page_template, 1, (size_t)(slot - tfm_attention_page_template), f);
  int status = write_data(f, p);
  fputs(slot + strlen("@DATA@"), f);
  if (ferror(f)) status = status ? status : tfm_fail("%s: write failed", tmp);
  if (fclose(f) && !status) status = tfm_fail("%s: write failed", tmp);
  if (!status && rename(tmp, path)) status = tfm_fail("%s: cannot rename %s to it", path, tmp);
  if (status) remove(tmp);
  return status;
}
