# Writes the header OUT from IN (cli/build_info.hpp.in) with the git commit
# of SOURCE_DIR ("unknown" outside git). Run with cmake -P on every build
# (cli/CMakeLists.txt), so --version names the commit the binary was built
# from; the file is rewritten only when its text changes, so an unchanged
# commit recompiles nothing.
execute_process(COMMAND git rev-parse --short HEAD
                WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE TESSERA_GIT_COMMIT
                OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE tessera_git_result
                ERROR_QUIET)
if(NOT tessera_git_result EQUAL 0 OR TESSERA_GIT_COMMIT STREQUAL "")
  set(TESSERA_GIT_COMMIT "unknown")
endif()
configure_file(${IN} ${OUT} @ONLY)
