/* Loading a program: the root file and, depth first, every file it imports.
 * An import is looked up beside the importing file, then in each -I folder,
 * then in the bundled models/ folder; each file is read once; cycles are
 * errors. */
#define _DEFAULT_SOURCE /* realpath */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "parser.h"
#include "sema_internal.h"

#ifndef TFM_MODELS_DIR
#define TFM_MODELS_DIR "models"
#endif

typedef struct Loaded {
  const char *canon;
  int state; /* 1: being loaded (on the import stack), 2: done */
  Node *program;
} Loaded;

static NameMap loaded; /* canonical path -> Loaded* */
static int load_errors; /* syntax errors, missing or cyclic imports, unreadable files */
static PtrVec import_stack; /* Node* N_IMPORT currently being followed */

static const char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return ".";
  return pool_strndup(path, (size_t)(slash - path));
}

static int is_regular_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *canonical(const char *path) {
  char buf[PATH_MAX];
  if (!realpath(path, buf)) return NULL;
  return pool_strdup(buf);
}

static Node *load_file(const char *path, const Node *from, const FrontOptions *opt,
                       CheckedModel *m);

static void load_imports(Node *program, const char *path, const FrontOptions *opt,
                         CheckedModel *m) {
  for (int i = 0; i < program->list.len && !diag_stopped(); i++) {
    Node *item = program->list.items[i];
    if (item->kind != N_IMPORT) continue;
    const char *name = item->sval;
    PtrVec tried = {0};
    const char *found = NULL;
    if (name[0] == '/') {
      vec_push(&tried, (void *)name);
      if (is_regular_file(name)) found = name;
    } else {
      vec_push(&tried, pool_printf("%s/%s", dir_of(path), name));
      for (int k = 0; k < opt->include_dirs.len; k++)
        vec_push(&tried, pool_printf("%s/%s", (char *)opt->include_dirs.items[k], name));
      vec_push(&tried, pool_printf("%s/%s", TFM_MODELS_DIR, name));
      for (int k = 0; k < tried.len && !found; k++)
        if (is_regular_file(tried.items[k])) found = tried.items[k];
    }
    if (!found) {
      diag_error(item->span, "cannot find the imported file \"%s\"", name);
      load_errors++;
      for (int k = 0; k < tried.len; k++) diag_note((Span){0}, "looked for %s", (char *)tried.items[k]);
      continue;
    }
    vec_push(&import_stack, item);
    load_file(found, item, opt, m);
    import_stack.len--;
  }
}

static Node *load_file(const char *path, const Node *from, const FrontOptions *opt,
                       CheckedModel *m) {
  const char *canon = canonical(path);
  if (canon) {
    Loaded *l = map_get(&loaded, canon);
    if (l && l->state == 1) {
      diag_error(from->span, "import cycle: \"%s\" is already being imported", from->sval);
      load_errors++;
      for (int k = import_stack.len - 2; k >= 0; k--) {
        Node *imp = import_stack.items[k];
        diag_note(imp->span, "imported from here");
      }
      return NULL;
    }
    if (l) return l->program; /* already loaded: once is enough */
  }
  const char *err = NULL;
  int file = source_load(path, &err);
  if (!file) {
    load_errors++;
    if (from) diag_error(from->span, "cannot read \"%s\": %s", path, err);
    else diag_error_noloc("cannot read %s: %s", path, err);
    return NULL;
  }
  Loaded *l = pool_alloc(sizeof *l);
  l->canon = canon ? canon : pool_strdup(path);
  l->state = 1;
  map_put(&loaded, l->canon, l);
  int errors;
  Node *program = parse_file(file, &errors);
  load_errors += errors;
  l->program = program;
  vec_push(&m->programs, program);
  load_imports(program, path, opt, m);
  l->state = 2;
  return program;
}

int front_load(const FrontOptions *opt, CheckedModel *m) {
  loaded = (NameMap){0};
  import_stack = (PtrVec){0};
  load_errors = 0;
  if (opt->text) {
    int errors;
    Node *program = parse_file(source_add_text(opt->path, opt->text, opt->text_len), &errors);
    load_errors += errors;
    vec_push(&m->programs, program);
    load_imports(program, opt->path, opt, m);
  } else if (!load_file(opt->path, NULL, opt, m)) {
    return 0;
  }
  return load_errors == 0;
}
