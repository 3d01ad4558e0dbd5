/* The tfm grammar. Newlines are not significant: statements need no
 * separator (an optional ';' is accepted). See docs/language.md. */
%define api.pure full
%define api.prefix {tfm_yy}
%define api.location.type {Span}
%define parse.error custom
%define parse.lac full
%locations
%param {void *scanner}
%parse-param {Node **result}

%code requires {
#include "ast.h"
#include "source.h"
}

%code provides {
int tfm_yylex(TFM_YYSTYPE *lval, Span *lloc, void *scanner);
/* Parses one source file already registered with source_add/source_load.
 * Returns the N_PROGRAM (possibly partial); errors go through diag and
 * *errors receives how many the scanner and the parser reported. */
Node *parse_file(int file, int *errors);
}

%code {
#include <string.h>

#include "diag.h"
#include "lexstate.h"
#ifndef YYSTYPE
#define YYSTYPE TFM_YYSTYPE
#endif
#ifndef YYLTYPE
#define YYLTYPE Span
#endif
#include "lexer.h"

#define YYMAXDEPTH 1000000

#define YYLLOC_DEFAULT(Cur, Rhs, N)                                   \
  do {                                                                \
    if (N) {                                                          \
      (Cur) = YYRHSLOC(Rhs, 1);                                       \
      (Cur).end_line = YYRHSLOC(Rhs, N).end_line;                     \
      (Cur).end_col = YYRHSLOC(Rhs, N).end_col;                       \
    } else {                                                          \
      (Cur) = YYRHSLOC(Rhs, 0);                                       \
      (Cur).line = (Cur).end_line;                                    \
      (Cur).col = (Cur).end_col + 1;                                  \
      (Cur).end_col = (Cur).col;                                      \
    }                                                                 \
  } while (0)

static void tfm_yyerror(Span *loc, void *scanner, Node **result, const char *msg) {
  (void)result;
  tfm_yyget_extra(scanner)->errors++;
  if (strcmp(msg, "memory exhausted") == 0)
    diag_error(*loc, "program is nested too deeply for the parser");
  else
    diag_error(*loc, "%s", msg);
}

static Node *leaf(NodeKind k, Span s) { return ast_new(k, s); }
static Node *named(NodeKind k, Span s, const char *name) {
  Node *n = ast_new(k, s);
  n->name = name;
  return n;
}
static Node *binary(Op op, Span s, Node *a, Node *b) {
  Node *n = ast_node3(N_BINARY, s, a, b, NULL);
  n->op = op;
  return n;
}
static Node *unary(Op op, Span s, Node *a) {
  Node *n = ast_node3(N_UNARY, s, a, NULL, NULL);
  n->op = op;
  return n;
}
/* Items and statements that carry a name plus up to three children. */
static Node *with_name(Node *n, const char *name) {
  n->name = name;
  return n;
}
static Node *with_params(Node *n, PtrVec params) {
  for (int i = 0; i < params.len; i++) ast_push(n, &n->params, params.items[i]);
  return n;
}
}

%union {
  int64_t ival;
  double fval;
  const char *str;
  Node *node;
  PtrVec vec;
}

%token KW_IMPORT "'import'" KW_CONFIG "'config'" KW_VARIANT "'variant'" KW_FN "'fn'"
%token KW_LAYER "'layer'" KW_MODEL "'model'" KW_TRAIN "'train'" KW_PARAM "'param'"
%token KW_PRETRAINED "'pretrained'"
%token KW_INPUT "'input'" KW_OUTPUT "'output'" KW_LET "'let'" KW_IF "'if'"
%token KW_ELSE "'else'" KW_FOR "'for'" KW_IN "'in'" KW_RETURN "'return'"
%token KW_ASSERT "'assert'" KW_AND "'and'" KW_OR "'or'" KW_NOT "'not'"
%token <str> IDENT "name" STRING "string"
%token <ival> INT "integer" BOOL "boolean"
%token <fval> FLOAT "number"
%token ELLIPSIS "'...'" DOTDOT "'..'" ARROW "'->'" POW "'**'" IDIV "'//'"
%token EQ "'=='" NE "'!='" LE "'<='" GE "'>='"

%left KW_OR
%left KW_AND
%precedence KW_NOT
%nonassoc EQ NE '<' LE '>' GE
%left '+' '-'
%left '*' '/' IDIV '%' '@'
%precedence UMINUS
%right POW

%type <node> program item entry_item fn layer model paramdef type dim stmt if_stmt
%type <node> block expr primary arg ret_opt init_opt input_decl target
%type <vec> entries paramdefs paramdefs_opt dims dims_opt stmts names args args_opt
%type <vec> exprs exprs_opt inputs

%%

program
  : %empty            { *result = leaf(N_PROGRAM, @$); $$ = *result; }
  | program item      { $$ = $1; if ($2) ast_push($$, &$$->list, $2); }
  | program error     { $$ = $1; }
  ;

item
  : KW_IMPORT STRING                  { $$ = leaf(N_IMPORT, @$); $$->sval = $2; }
  | KW_CONFIG '{' entries '}'         { $$ = leaf(N_CONFIG, @1);
                                        for (int i = 0; i < $3.len; i++) ast_push($$, &$$->list, $3.items[i]); }
  | KW_VARIANT IDENT '{' entries '}'  { $$ = named(N_VARIANT, @2, $2);
                                        for (int i = 0; i < $4.len; i++) ast_push($$, &$$->list, $4.items[i]); }
  | KW_TRAIN '{' entries '}'          { $$ = leaf(N_TRAIN, @1);
                                        for (int i = 0; i < $3.len; i++) ast_push($$, &$$->list, $3.items[i]); }
  | KW_PRETRAINED IDENT block         { $$ = with_name(ast_node3(N_PRETRAINED, @2, NULL, NULL, $3), $2); }
  | fn | layer | model
  | ';'                               { $$ = NULL; }
  ;

entries
  : %empty                 { $$ = (PtrVec){0}; }
  | entries entry_item     { $$ = $1; vec_push(&$$, $2); }
  | entries ';'            { $$ = $1; }
  | entries error          { $$ = $1; }
  ;

entry_item
  : IDENT '=' expr         { $$ = with_name(ast_node3(N_ENTRY, @1, $3, NULL, NULL), $1); }
  ;

fn
  : KW_FN IDENT '(' paramdefs_opt ')' ret_opt block
      { $$ = with_params(with_name(ast_node3(N_FN, @2, NULL, NULL, $7), $2), $4);
        ast_set_type($$, $6); }
  ;

layer
  : KW_LAYER IDENT '(' paramdefs_opt ')' block
      { $$ = with_params(with_name(ast_node3(N_LAYER, @2, NULL, NULL, $6), $2), $4); }
  | KW_LAYER IDENT block
      { $$ = with_name(ast_node3(N_LAYER, @2, NULL, NULL, $3), $2); }
  ;

model
  : KW_MODEL IDENT block   { $$ = with_name(ast_node3(N_MODEL, @2, NULL, NULL, $3), $2); }
  ;

paramdefs_opt
  : %empty                 { $$ = (PtrVec){0}; }
  | paramdefs              { $$ = $1; }
  | paramdefs ','          { $$ = $1; }
  ;

paramdefs
  : paramdef               { $$ = (PtrVec){0}; vec_push(&$$, $1); }
  | paramdefs ',' paramdef { $$ = $1; vec_push(&$$, $3); }
  ;

paramdef
  : IDENT                       { $$ = named(N_PARAMDEF, @1, $1); }
  | IDENT ':' type              { $$ = named(N_PARAMDEF, @1, $1); ast_set_type($$, $3); }
  | IDENT '=' expr              { $$ = with_name(ast_node3(N_PARAMDEF, @1, $3, NULL, NULL), $1); }
  | IDENT ':' type '=' expr     { $$ = with_name(ast_node3(N_PARAMDEF, @1, $5, NULL, NULL), $1);
                                  ast_set_type($$, $3); }
  ;

ret_opt
  : %empty                 { $$ = NULL; }
  | ARROW type             { $$ = $2; }
  ;

type
  : IDENT                  { $$ = named(N_TYPE, @1, $1); }
  | IDENT '[' dims_opt ']' { Node *d = leaf(N_LIST, @2);
                             for (int i = 0; i < $3.len; i++) ast_push(d, &d->list, $3.items[i]);
                             $$ = with_name(ast_node3(N_TYPE, @$, NULL, d, NULL), $1); }
  ;

dims_opt
  : %empty                 { $$ = (PtrVec){0}; }
  | dims                   { $$ = $1; }
  | dims ','               { $$ = $1; }
  ;

dims
  : dim                    { $$ = (PtrVec){0}; vec_push(&$$, $1); }
  | dims ',' dim           { $$ = $1; vec_push(&$$, $3); }
  ;

dim
  : expr                   { $$ = $1; }
  | ELLIPSIS               { $$ = leaf(N_ELLIPSIS, @1); }
  ;

block
  : '{' stmts '}'          { $$ = leaf(N_BLOCK, @$);
                             for (int i = 0; i < $2.len; i++) ast_push($$, &$$->list, $2.items[i]); }
  ;

stmts
  : %empty                 { $$ = (PtrVec){0}; }
  | stmts stmt             { $$ = $1; if ($2) vec_push(&$$, $2); }
  | stmts ';'              { $$ = $1; }
  | stmts error            { $$ = $1; }
  ;

stmt
  : KW_LET IDENT '=' expr                  { $$ = with_name(ast_node3(N_LET, @2, $4, NULL, NULL), $2); }
  | KW_LET IDENT '[' expr ']' '=' expr     { $$ = with_name(ast_node3(N_LET, @2, $7, $4, NULL), $2); }
  | IDENT '=' expr                         { $$ = with_name(ast_node3(N_ASSIGN, @1, $3, NULL, NULL), $1); }
  | target '.' IDENT '=' expr              { Node *member = with_name(ast_node3(N_MEMBER, @1, $1, NULL, NULL), $3);
                                             member->span.end_line = @3.end_line;
                                             member->span.end_col = @3.end_col;
                                             $$ = ast_node3(N_SET, @$, member, $5, NULL); }
  | KW_PARAM names ':' type init_opt       { $$ = ast_node3(N_PARAM, @1, $5, NULL, NULL);
                                             for (int i = 0; i < $2.len; i++) ast_push($$, &$$->list, $2.items[i]);
                                             ast_set_type($$, $4); }
  | KW_INPUT inputs                        { $$ = leaf(N_BLOCK, @1);
                                             for (int i = 0; i < $2.len; i++) ast_push($$, &$$->list, $2.items[i]); }
  | KW_OUTPUT IDENT                        { $$ = named(N_OUTPUT, @2, $2); }
  | KW_OUTPUT IDENT '=' expr               { $$ = with_name(ast_node3(N_OUTPUT, @2, $4, NULL, NULL), $2); }
  | if_stmt                                { $$ = $1; }
  | KW_FOR IDENT KW_IN expr DOTDOT expr block
                                           { $$ = with_name(ast_node3(N_FOR, @1, $4, $6, $7), $2); }
  | KW_RETURN expr                         { $$ = ast_node3(N_RETURN, @1, $2, NULL, NULL); }
  | KW_ASSERT '(' expr ')'                 { $$ = ast_node3(N_ASSERT, @1, $3, NULL, NULL); }
  | KW_ASSERT '(' expr ',' STRING ')'      { Node *m = leaf(N_STRING, @5); m->sval = $5;
                                             $$ = ast_node3(N_ASSERT, @1, $3, m, NULL); }
  | KW_FN '(' paramdefs_opt ')' ret_opt block
                                           { $$ = with_params(ast_node3(N_FORWARD, @1, NULL, NULL, $6), $3);
                                             ast_set_type($$, $5); }
  ;

/* What `target.name = expr` assigns to (a pretrained block's parameters):
 * names, members and indices only, so that a statement can start with it. */
target
  : IDENT                  { $$ = named(N_NAME, @1, $1); }
  | target '.' IDENT       { $$ = with_name(ast_node3(N_MEMBER, @$, $1, NULL, NULL), $3); }
  | target '[' expr ']'    { $$ = ast_node3(N_INDEX, @$, $1, $3, NULL); }
  ;

inputs
  : input_decl             { $$ = (PtrVec){0}; vec_push(&$$, $1); }
  | inputs ',' input_decl  { $$ = $1; vec_push(&$$, $3); }
  ;

input_decl
  : IDENT ':' type         { $$ = named(N_INPUT, @1, $1); ast_set_type($$, $3); }
  ;

names
  : IDENT                  { $$ = (PtrVec){0}; vec_push(&$$, named(N_NAME, @1, $1)); }
  | names ',' IDENT        { $$ = $1; vec_push(&$$, named(N_NAME, @3, $3)); }
  ;

init_opt
  : %empty                 { $$ = NULL; }
  | '=' expr               { $$ = $2; }
  ;

if_stmt
  : KW_IF expr block                       { $$ = ast_node3(N_IF, @1, $2, $3, NULL); }
  | KW_IF expr block KW_ELSE block         { $$ = ast_node3(N_IF, @1, $2, $3, $5); }
  | KW_IF expr block KW_ELSE if_stmt       { $$ = ast_node3(N_IF, @1, $2, $3, $5); }
  ;

expr
  : primary                { $$ = $1; }
  | expr KW_OR expr        { $$ = binary(OP_OR, @$, $1, $3); }
  | expr KW_AND expr       { $$ = binary(OP_AND, @$, $1, $3); }
  | KW_NOT expr            { $$ = unary(OP_NOT, @$, $2); }
  | expr EQ expr           { $$ = binary(OP_EQ, @$, $1, $3); }
  | expr NE expr           { $$ = binary(OP_NE, @$, $1, $3); }
  | expr '<' expr          { $$ = binary(OP_LT, @$, $1, $3); }
  | expr LE expr           { $$ = binary(OP_LE, @$, $1, $3); }
  | expr '>' expr          { $$ = binary(OP_GT, @$, $1, $3); }
  | expr GE expr           { $$ = binary(OP_GE, @$, $1, $3); }
  | expr '+' expr          { $$ = binary(OP_ADD, @$, $1, $3); }
  | expr '-' expr          { $$ = binary(OP_SUB, @$, $1, $3); }
  | expr '*' expr          { $$ = binary(OP_MUL, @$, $1, $3); }
  | expr '/' expr          { $$ = binary(OP_DIV, @$, $1, $3); }
  | expr IDIV expr         { $$ = binary(OP_IDIV, @$, $1, $3); }
  | expr '%' expr          { $$ = binary(OP_MOD, @$, $1, $3); }
  | expr '@' expr          { $$ = binary(OP_MATMUL, @$, $1, $3); }
  | expr POW expr          { $$ = binary(OP_POW, @$, $1, $3); }
  | '-' expr %prec UMINUS  { $$ = unary(OP_NEG, @$, $2); }
  | '+' expr %prec UMINUS  { $$ = unary(OP_PLUS, @$, $2); }
  ;

primary
  : INT                    { $$ = leaf(N_INT, @1); $$->ival = $1; }
  | FLOAT                  { $$ = leaf(N_FLOAT, @1); $$->fval = $1; }
  | STRING                 { $$ = leaf(N_STRING, @1); $$->sval = $1; }
  | BOOL                   { $$ = leaf(N_BOOL, @1); $$->ival = $1; }
  | IDENT                  { $$ = named(N_NAME, @1, $1); }
  | '(' expr ')'           { $$ = $2; }
  | '[' exprs_opt ']'      { $$ = leaf(N_LIST, @$);
                             for (int i = 0; i < $2.len; i++) ast_push($$, &$$->list, $2.items[i]); }
  | primary '(' args_opt ')' { $$ = ast_node3(N_CALL, @$, $1, NULL, NULL);
                             for (int i = 0; i < $3.len; i++) ast_push($$, &$$->list, $3.items[i]); }
  | primary '.' IDENT      { $$ = with_name(ast_node3(N_MEMBER, @$, $1, NULL, NULL), $3); }
  | primary '[' expr ']'   { $$ = ast_node3(N_INDEX, @$, $1, $3, NULL); }
  ;

exprs_opt
  : %empty                 { $$ = (PtrVec){0}; }
  | exprs                  { $$ = $1; }
  | exprs ','              { $$ = $1; }
  ;

exprs
  : expr                   { $$ = (PtrVec){0}; vec_push(&$$, $1); }
  | exprs ',' expr         { $$ = $1; vec_push(&$$, $3); }
  ;

args_opt
  : %empty                 { $$ = (PtrVec){0}; }
  | args                   { $$ = $1; }
  | args ','               { $$ = $1; }
  ;

args
  : arg                    { $$ = (PtrVec){0}; vec_push(&$$, $1); }
  | args ',' arg           { $$ = $1; vec_push(&$$, $3); }
  ;

arg
  : expr                   { $$ = ast_node3(N_ARG, @1, $1, NULL, NULL); }
  | IDENT '=' expr         { $$ = with_name(ast_node3(N_ARG, @1, $3, NULL, NULL), $1); }
  ;

%%

/* "expected X or Y, found Z": names the token found and up to four that
 * would have been accepted. */
static int yyreport_syntax_error(const yypcontext_t *ctx, void *scanner, Node **result) {
  (void)result;
  struct LexState *state = tfm_yyget_extra(scanner);
  state->errors++;
  enum { MAX_EXPECTED = 4 };
  yysymbol_kind_t expected[MAX_EXPECTED + 1];
  int n = yypcontext_expected_tokens(ctx, expected, MAX_EXPECTED + 1);
  yysymbol_kind_t found = yypcontext_token(ctx);
  char msg[512];
  size_t len = 0;
  if (found == YYSYMBOL_YYEOF)
    len += (size_t)snprintf(msg, sizeof msg, "syntax error: unexpected end of file");
  else
    len += (size_t)snprintf(msg, sizeof msg, "syntax error: unexpected %s", yysymbol_name(found));
  if (n > 0 && n <= MAX_EXPECTED) {
    len += (size_t)snprintf(msg + len, sizeof msg - len, ", expected ");
    for (int i = 0; i < n && len < sizeof msg; i++)
      len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s",
                              i == 0 ? "" : (i == n - 1 ? " or " : ", "),
                              yysymbol_name(expected[i]));
  }
  diag_error(*yypcontext_location(ctx), "%s", msg);
  if (found == YYSYMBOL_YYEOF && state->open_depth > 0 && state->open_depth <= LEX_MAX_OPEN) {
    Span open = state->open[state->open_depth - 1];
    size_t len;
    const char *line = source_line(open.file, open.line, &len);
    char c = (size_t)open.col <= len ? line[open.col - 1] : '(';
    diag_note(open, "the '%c' opened here is not closed", c);
  }
  return 0;
}

Node *parse_file(int file, int *errors) {
  const SourceFile *f = source_get(file);
  struct LexState state = {.file = file, .line = 1, .col = 1};
  yyscan_t scanner;
  tfm_yylex_init_extra(&state, &scanner);
  YY_BUFFER_STATE buf = tfm_yy_scan_bytes(f->text, (int)f->len, scanner);
  Node *program = NULL;
  tfm_yyparse(scanner, &program);
  tfm_yy_delete_buffer(buf, scanner);
  tfm_yylex_destroy(scanner);
  *errors = state.errors;
  if (!program) program = leaf(N_PROGRAM, (Span){0});
  program->span = (Span){file, 1, 1, 1, 1};
  return program;
}
