-- Neovim's own LSP client (headless) against `tfmc lsp`: opens a model,
-- hovers `x` inside the block loop and reads back its shape, then edits a
-- line into a shape error and reads the diagnostic's line:col. The file is
-- not written: the edit lives in the buffer, as when a user types.
-- Run: TFMC=.../tfmc TFM_MODEL=.../gpt.tfm nvim --headless --clean -c "luafile THIS"
local tfmc, model = os.getenv("TFMC"), os.getenv("TFM_MODEL")
local t = dofile(os.getenv("TFM_NVIM_CHECK"))
local check = t.check
vim.cmd("edit " .. vim.fn.fnameescape(model))
local buf = vim.api.nvim_get_current_buf()
local id = vim.lsp.start_client({name = "tfm", cmd = {tfmc, "lsp"},
                                 root_dir = vim.fn.fnamemodify(model, ":h")})
check(id ~= nil, "the client starts tfmc lsp")
vim.lsp.buf_attach_client(buf, id)
local ready = vim.wait(10000, function()
  local c = vim.lsp.get_client_by_id(id)
  return c ~= nil and c.server_capabilities ~= nil and c.server_capabilities.hoverProvider == true
end, 20)
check(ready, "the server initializes and offers hover")
-- no diagnostics on the model as it is
vim.wait(500, function() return #vim.diagnostic.get(buf) > 0 end, 20)
check(#vim.diagnostic.get(buf) == 0, "models/gpt.tfm has no diagnostics")

-- hover on the x passed to block[i]
local row = vim.fn.search("x = block\\[i\\](x", "w")
local line = vim.api.nvim_buf_get_lines(buf, row - 1, row, false)[1]
local col = line:find("(x", 1, true) -- the "(" before x, 1-based; x is at col (0-based)
vim.api.nvim_win_set_cursor(0, {row, col})
local replies = vim.lsp.buf_request_sync(buf, "textDocument/hover",
                                         vim.lsp.util.make_position_params(), 10000)
local text = ""
for _, r in pairs(replies or {}) do
  if r.result and r.result.contents then text = r.result.contents.value or "" end
end
check(text:find("f32[batch=16, seq_len=128, d_model=256]", 1, true) ~= nil,
      "hover on x in the block loop reads its shape: " .. text:gsub("\n", " "))

-- a shape error: the output projection without its transpose
local out_row = vim.fn.search("output logits = ln_f(x) @ transpose(wte.table)", "w")
local out_line = vim.api.nvim_buf_get_lines(buf, out_row - 1, out_row, false)[1]
local edited = out_line:gsub("transpose%(wte%.table%)", "wte.table")
vim.api.nvim_buf_set_lines(buf, out_row - 1, out_row, false, {edited})
local got = vim.wait(10000, function() return #vim.diagnostic.get(buf) > 0 end, 20)
local d = vim.diagnostic.get(buf)[1]
check(got and d ~= nil, "an edit that breaks a shape gets a diagnostic")
if d then
  local want_col = edited:find("ln_f(x)", 1, true) -- where tfmc check puts it, 1-based
  io.stdout:write(string.format("diagnostic at %d:%d: %s\n", d.lnum + 1, d.col + 1, d.message))
  check(d.lnum + 1 == out_row and d.col + 1 == want_col,
        string.format("the diagnostic is at %d:%d, the '@' expression", out_row, want_col))
  check(d.message:find("inner dimensions differ", 1, true) ~= nil, "with the checker's message")
end
vim.lsp.stop_client(id)
t.finish()
