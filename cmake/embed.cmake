# embed.cmake — cmake -DIN=file -DOUT=file.c -DNAME=ident -P embed.cmake
# Writes OUT, a C file defining `const char NAME[]`: the bytes of IN and a
# terminating NUL (a text file compiled into the library, e.g. the prelude
# of generated C, kept as a real header file in the source tree).
file(READ "${IN}" content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed.cmake: do not edit */\nconst char ${NAME}[] = {\n${bytes}0x00};\n")
