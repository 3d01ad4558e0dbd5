" Vim syntax file for tfm model files (.tfm). Install: see docs/editors.md.
" The same classes as editors/tfm.tmLanguage.json; the built-ins are those of
" compiler/front/builtins.c (tests/editors/check_vim.sh checks that).
if exists("b:current_syntax")
  finish
endif

syntax keyword tfmKeyword import config variant fn layer model train pretrained let param input output
syntax keyword tfmConditional if else
syntax keyword tfmRepeat for in
syntax keyword tfmStatement return assert
syntax keyword tfmOperatorWord and or not
syntax keyword tfmBoolean true false
syntax keyword tfmConstant inf pi training decoding
syntax keyword tfmType f32 f64 i32 bf16 int float bool str
syntax keyword tfmInit zeros ones xavier_uniform xavier_normal
syntax keyword tfmBuiltin exp log sqrt rsqrt tanh sin cos erf abs recip stop_gradient
syntax keyword tfmBuiltin max min sum mean select cast reshape permute transpose broadcast
syntax keyword tfmBuiltin expand squeeze slice concat pad gather one_hot iota full tensor
syntax keyword tfmBuiltin random_uniform shape dim rank dtype len append range float int
syntax keyword tfmBuiltin normal uniform constant sgd adam adamw source str decode_pos kv_cache
" the name after fn/layer/model/variant (a look-behind: the keyword itself
" is matched first, as a keyword)
syntax match tfmDefinition "\(\<\(fn\|layer\|model\|variant\)\s\+\)\@<=[A-Za-z_][A-Za-z0-9_]*"
syntax match tfmNumber "\<[0-9]\+\>"
syntax match tfmFloat "\<[0-9]\+\(\.[0-9]\+\([eE][+-]\=[0-9]\+\)\=\|[eE][+-]\=[0-9]\+\)\>"
syntax match tfmOperator "\*\*\|//\|==\|!=\|<=\|>=\|->\|\.\.\.\=\|[-+*/%@<>=]"
syntax match tfmEscape contained "\\."
syntax region tfmString start=+"+ skip=+\\.+ end=+"\|$+ contains=tfmEscape
syntax match tfmComment "#.*$" contains=@Spell

highlight default link tfmKeyword Keyword
highlight default link tfmConditional Conditional
highlight default link tfmRepeat Repeat
highlight default link tfmStatement Statement
highlight default link tfmOperatorWord Operator
highlight default link tfmBoolean Boolean
highlight default link tfmConstant Constant
highlight default link tfmType Type
highlight default link tfmInit Constant
highlight default link tfmBuiltin Function
highlight default link tfmDefinition Function
highlight default link tfmNumber Number
highlight default link tfmFloat Float
highlight default link tfmOperator Operator
highlight default link tfmEscape SpecialChar
highlight default link tfmString String
highlight default link tfmComment Comment

let b:current_syntax = "tfm"
