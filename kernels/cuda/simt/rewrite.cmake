# Turns a CUDA source into C++ for the SIMT emulator (simt.h): cmake -DIN=x.cu -DOUT=x.cc -P
# rewrite.cmake. Kernel launches `k<<<grid, block, shared, stream>>>(args)` become
# `k << Config(grid, block, shared, stream) << Args(args)`, and
# `extern __shared__ [__align__(N)] T name[];` becomes a pointer to the block's dynamic shared
# memory (allocated with new[]: 16-byte aligned, enough for the host's types). Everything else stays as written
# (#line keeps diagnostics on the original file).
file(READ "${IN}" text)
string(REPLACE "<<<" " << ::tessera::simt::Config(" text "${text}")
string(REPLACE ">>>(" ") << ::tessera::simt::Args(" text "${text}")
string(REGEX REPLACE "extern __shared__ (__align__\\([0-9]+\\) )?([A-Za-z_0-9:]+) ([A-Za-z_0-9]+)\\[\\];"
       "\\2* \\3 = ::tessera::simt::DynamicSharedAs<\\2>();" text "${text}")
if(text MATCHES "<<<|>>>|extern __shared__")
  message(FATAL_ERROR "${IN}: a launch or shared declaration the SIMT rewrite does not know")
endif()
file(WRITE "${OUT}" "#line 1 \"${IN}\"\n${text}")
