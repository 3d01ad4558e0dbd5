-- What the headless Neovim tests share: check() prints ok/FAIL lines,
-- finish() prints the count and quits with status 0 or 1.
local M = {failed = 0}

function M.check(ok, what)
  io.stdout:write((ok and "ok   " or "FAIL ") .. what .. "\n")
  if not ok then M.failed = M.failed + 1 end
end

function M.finish()
  io.stdout:write(M.failed == 0 and "all checks passed\n" or (M.failed .. " check(s) failed\n"))
  io.stdout:flush()
  vim.cmd(M.failed == 0 and "qall!" or "cquit!")
end

return M
