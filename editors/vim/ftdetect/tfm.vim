" .tfm files are tfm models (set, not setfiletype: some set-ups take any
" file with # comments for a conf file first).
autocmd BufRead,BufNewFile *.tfm set filetype=tfm
