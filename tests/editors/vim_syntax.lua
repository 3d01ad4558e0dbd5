-- editors/vim/syntax/tfm.vim in Neovim (headless): the file type is
-- detected from the name, the syntax file loads without an error, and
-- tokens of models/gpt.tfm get the groups they should.
-- Run: TFM_EDITORS=.../editors TFM_MODEL=.../gpt.tfm nvim --headless --clean -n
--        --cmd "set rtp^=.../editors/vim" -c "luafile THIS"
-- (the folder joins the runtime path before start-up, as in a user's init)
local editors, model = os.getenv("TFM_EDITORS"), os.getenv("TFM_MODEL")
local t = dofile(os.getenv("TFM_NVIM_CHECK"))
local check = t.check

check(vim.o.runtimepath:find(editors .. "/vim", 1, true) ~= nil, "editors/vim is on the runtime path")
vim.cmd("syntax on")
vim.cmd("edit " .. vim.fn.fnameescape(model))
check(vim.bo.filetype == "tfm", "a .tfm file has filetype tfm (got '" .. vim.bo.filetype .. "')")
check(vim.b.current_syntax == "tfm", "the tfm syntax is loaded")

-- the group at the first match of a pattern (offset: bytes into the match)
local function group_of(pattern, offset)
  local row = vim.fn.search(pattern, "cw")
  if row == 0 then return "(not found: " .. pattern .. ")" end
  local col = vim.fn.col(".") + (offset or 0)
  return vim.fn.synIDattr(vim.fn.synID(row, col, 1), "name")
end

local want = {
  {"^import", 0, "tfmKeyword"}, {"^# A decoder", 2, "tfmComment"},
  {"\"std/nn.tfm\"", 3, "tfmString"}, {"3e-4", 0, "tfmFloat"}, {"= 1024", 2, "tfmNumber"},
  {"model gpt", 6, "tfmDefinition"}, {"i32\\[batch", 0, "tfmType"},
  {"transpose(wte", 0, "tfmBuiltin"}, {"for i in", 0, "tfmRepeat"}, {"@ transpose", 0, "tfmOperator"},
}
for _, w in ipairs(want) do
  vim.api.nvim_win_set_cursor(0, {1, 0})
  local got = group_of(w[1], w[2])
  check(got == w[3], string.format("%-16s is %s (got %s)", w[1], w[3], got))
end
t.finish()
