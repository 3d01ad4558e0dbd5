# cmake -DINPUT=FILE -DOUTPUT=FILE.c -DNAME=symbol -P embed.cmake
# Writes FILE as `const char symbol[]` (NUL-terminated) into a C file, so
# that a page template stays an HTML file in the source tree.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
       "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}" "/* Generated from ${INPUT} by embed.cmake. */\nconst char ${NAME}[] = {\n${bytes}0x00};\n")
