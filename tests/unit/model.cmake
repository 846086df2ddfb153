# Architecture registry, hyper-parameters, tensor map, fixups, shard plan, synthetic models.
tessera_test(model_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_test.cc
  DEPS tessera_model)
tessera_test(model_fixups_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_fixups_test.cc
  DEPS tessera_model)
if(TARGET tessera_cli)
  tessera_test(validate_command_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/validate_command_test.cc
    DEPS tessera_cli)
endif()
