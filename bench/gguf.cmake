# gguf_make_split_set: writes a large sparse split set for timing `tessera inspect`
# (see bench/inspect_split_set.sh).
add_executable(gguf_make_split_set ${CMAKE_CURRENT_LIST_DIR}/gguf_make_split_set.cc)
target_include_directories(gguf_make_split_set PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(gguf_make_split_set PRIVATE ${TESSERA_WARNINGS})
target_link_libraries(gguf_make_split_set PRIVATE tessera_gguf)
