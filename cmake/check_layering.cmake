# The layering check (ctest: layering): the arrows between Tessera's
# libraries stay as DESIGN.md draws them.
#
#   cmake -DSOURCE_DIR=<tree> [-DLINK_GRAPH=<build>/layering/link_graph.cmake]
#         -P cmake/check_layering.cmake
#
# 1. Includes: every #include "<dir>/..." in a folder's sources names a
#    folder that folder may depend on (the table below).
# 2. Links (with LINK_GRAPH): the libraries that must stay free of server
#    code (the protocol library, the wire format, the client SDK) reach no
#    server library through their whole link closure.
# Fails naming every offending file and include, or target and path.

cmake_minimum_required(VERSION 3.25)

# Folder -> the folders its sources may include. A folder not listed is not
# checked (cli/ and tests/ may include anything).
set(allow_common    common)
set(allow_protocol  protocol common)
set(allow_transport transport protocol common)
set(allow_engine    engine protocol common)
set(allow_kvstore   kvstore engine protocol common)
set(allow_cluster   cluster transport protocol common)
set(allow_launch    launch cluster protocol common)
set(allow_sdk       sdk transport protocol common)
set(allow_actors    actors kvstore engine cluster transport protocol common)
set(allow_chaos     chaos bench cluster engine transport protocol common)
set(allow_bench     bench sdk kvstore engine cluster transport protocol common)
set(checked_folders common protocol transport engine kvstore cluster launch sdk actors chaos bench)

# Library -> the libraries its link closure must not reach (a regex over
# target names): the server's (engine and its backends, grammar, jinja,
# kvstore, cluster, every actor library, the router and frontend ones).
set(server_libs "^tessera_(engine|grammar|jinja|kvstore|cluster|actor|router|frontend|http)")
set(forbid_tessera_protocol       "${server_libs}|^tessera_transport")
set(forbid_tessera_transport_wire "${server_libs}")
set(forbid_tessera_sdk            "${server_libs}")
set(link_checked tessera_protocol tessera_transport_wire tessera_sdk)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layering: pass -DSOURCE_DIR=<source tree>")
endif()

set(problems "")
set(files_checked 0)
foreach(folder IN LISTS checked_folders)
  if(NOT IS_DIRECTORY ${SOURCE_DIR}/${folder})
    continue()
  endif()
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
       ${SOURCE_DIR}/${folder}/*.hpp ${SOURCE_DIR}/${folder}/*.cpp
       ${SOURCE_DIR}/${folder}/*.h ${SOURCE_DIR}/${folder}/*.cu ${SOURCE_DIR}/${folder}/*.cuh)
  foreach(src IN LISTS sources)
    math(EXPR files_checked "${files_checked} + 1")
    file(STRINGS ${SOURCE_DIR}/${src} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[A-Za-z0-9_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([A-Za-z0-9_]+)/.*" "\\1" root "${line}")
      if(NOT root IN_LIST allow_${folder})
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*" "" what "${line}")
        list(JOIN allow_${folder} ", " allowed)
        list(APPEND problems "${src} includes ${what}: ${folder}/ may include only ${allowed}")
      endif()
    endforeach()
  endforeach()
endforeach()

if(LINK_GRAPH)
  if(NOT EXISTS ${LINK_GRAPH})
    message(FATAL_ERROR "check_layering: ${LINK_GRAPH} is missing (configure the build first)")
  endif()
  include(${LINK_GRAPH})
  foreach(lib IN LISTS link_checked)
    if(NOT lib IN_LIST tessera_targets)
      continue()
    endif()
    # Breadth-first over the link graph, remembering how each was reached.
    set(queue ${lib})
    set(seen ${lib})
    set(via_${lib} "${lib}")
    while(queue)
      list(POP_FRONT queue t)
      foreach(dep IN LISTS links_${t})
        if(dep IN_LIST seen)
          continue()
        endif()
        list(APPEND seen ${dep})
        list(APPEND queue ${dep})
        set(via_${dep} "${via_${t}} -> ${dep}")
        if(dep MATCHES "${forbid_${lib}}")
          list(APPEND problems "${lib} links server library ${dep}: ${via_${dep}}")
        endif()
      endforeach()
    endwhile()
  endforeach()
endif()

if(problems)
  list(LENGTH problems n)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "layering: ${n} problem(s):\n  ${text}")
endif()
list(JOIN link_checked ", " linked)
message(STATUS "layering: ${files_checked} files and the link closures of ${linked} follow the table")
