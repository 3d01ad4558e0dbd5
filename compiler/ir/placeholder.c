/* replaced by the graph IR */ int tfm_ir_placeholder;
