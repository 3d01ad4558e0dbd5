/* String key/value metadata (a checkpoint's "__metadata__"). */
#include "tfmrt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static char *copy_string(const char *s) {
  size_t len = strlen(s) + 1;
  char *copy = malloc(len);
  if (copy) memcpy(copy, s, len);
  return copy;
}

static tfm_meta_entry *find_entry(const tfm_meta *meta, const char *key) {
  for (size_t i = 0; i < meta->count; i++)
    if (strcmp(meta->entries[i].key, key) == 0) return &meta->entries[i];
  return NULL;
}

int tfm_meta_set(tfm_meta *meta, const char *key, const char *value) {
  char *value_copy = copy_string(value);
  if (!value_copy) return tfm_fail("metadata '%s': out of memory", key);
  tfm_meta_entry *entry = find_entry(meta, key);
  if (entry) {
    free(entry->value);
    entry->value = value_copy;
    return TFM_OK;
  }
  if (meta->count == meta->capacity) {
    size_t capacity = meta->capacity ? 2 * meta->capacity : 8;
    tfm_meta_entry *grown = realloc(meta->entries, capacity * sizeof *grown);
    if (!grown) {
      free(value_copy);
      return tfm_fail("metadata '%s': out of memory", key);
    }
    meta->entries = grown;
    meta->capacity = capacity;
  }
  char *key_copy = copy_string(key);
  if (!key_copy) {
    free(value_copy);
    return tfm_fail("metadata '%s': out of memory", key);
  }
  meta->entries[meta->count++] = (tfm_meta_entry){key_copy, value_copy};
  return TFM_OK;
}

const char *tfm_meta_get(const tfm_meta *meta, const char *key) {
  const tfm_meta_entry *entry = find_entry(meta, key);
  return entry ? entry->value : NULL;
}

int tfm_meta_set_u64(tfm_meta *meta, const char *key, uint64_t value) {
  char text[24];
  snprintf(text, sizeof text, "%" PRIu64, value);
  return tfm_meta_set(meta, key, text);
}

int tfm_meta_get_u64(const tfm_meta *meta, const char *key, uint64_t *value) {
  const char *text = tfm_meta_get(meta, key);
  if (!text) return tfm_fail("metadata has no '%s'", key);
  /* Plain decimal only: strtoull alone would accept " +12" and "-1". */
  if (text[0] < '0' || text[0] > '9')
    return tfm_fail("metadata '%s' is \"%s\", not an unsigned integer", key, text);
  char *end;
  errno = 0;
  unsigned long long parsed = strtoull(text, &end, 10);
  if (*end != '\0' || errno == ERANGE)
    return tfm_fail("metadata '%s' is \"%s\", not an unsigned 64-bit integer", key, text);
  *value = (uint64_t)parsed;
  return TFM_OK;
}

void tfm_meta_clear(tfm_meta *meta) {
  for (size_t i = 0; i < meta->count; i++) {
    free(meta->entries[i].key);
    free(meta->entries[i].value);
  }
  free(meta->entries);
  *meta = (tfm_meta){0};
}
