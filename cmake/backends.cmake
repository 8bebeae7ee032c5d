# Store backends: every folder src/store/<scheme>/ that has a CMakeLists.txt
# registers itself with bw_add_backend (or bw_absent_backend when its
# dependency is missing). Adding a backend is adding its folder: nothing here,
# in another backend or in the engine changes. This file collects what they
# registered and generates the scheme table (backends.c) and the component bits.

set_property(GLOBAL PROPERTY BW_BACKENDS "")
set_property(GLOBAL PROPERTY BW_ABSENT_BACKENDS "")
set_property(GLOBAL PROPERTY BW_BACKEND_SOURCES "")
set_property(GLOBAL PROPERTY BW_BACKEND_INCLUDES "")
set_property(GLOBAL PROPERTY BW_BACKEND_LIBS "")
set_property(GLOBAL PROPERTY BW_COMPONENT_BITS 0)
set_property(GLOBAL PROPERTY BW_TEST_BACKENDS "")
set_property(GLOBAL PROPERTY BW_COMPONENTS "")
set_property(GLOBAL PROPERTY BW_CORE_BACKEND_SOURCES "")

# bw_add_component(name BIT bit SOURCES files... [INCLUDES dirs...] [LIBS libs...])
# An optional component with a dependency of its own: in the library as it
# ships, its own library libbreakwater-<name> (base/component.h); in the
# tests' and the command's builds, compiled in. A store backend's folder is
# one (bw_add_backend with COMPONENT); the integrations call it themselves.
function(bw_add_component name)
  cmake_parse_arguments(C "" "BIT" "SOURCES;INCLUDES;LIBS" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY BW_COMPONENTS ${name})
  set_property(GLOBAL PROPERTY BW_COMP_BIT_${name} ${C_BIT})
  set_property(GLOBAL APPEND PROPERTY BW_COMP_SOURCES_${name} ${C_SOURCES})
  set_property(GLOBAL APPEND PROPERTY BW_COMP_INCLUDES_${name} ${C_INCLUDES})
  set_property(GLOBAL APPEND PROPERTY BW_COMP_LIBS_${name} ${C_LIBS})
  get_property(bits GLOBAL PROPERTY BW_COMPONENT_BITS)
  math(EXPR bits "${bits} | ${C_BIT}" OUTPUT_FORMAT HEXADECIMAL)
  set_property(GLOBAL PROPERTY BW_COMPONENT_BITS ${bits})
endfunction()

# bw_add_backend(scheme [COMPONENT bit] SOURCES files... [INCLUDES dirs...] [LIBS libs...]
#                [TEST_URL url [PROCS keep-across-fork|reopen-after-fork] [TEST_WRAPPER script]])
# The backend's sources define `const bw__backend bw__backend_<scheme>`.
# TEST_URL: the URL the tests run the store contract on (tests/contract/), with
# placeholders the test expands so that runs never collide: %p the test's pid,
# %n a fresh store, %d a temporary directory (tests/support/store_url.h).
# PROCS: processes share the store (tests/integration/ then run on it), and
# whether a process may keep its store open across fork() (keep-across-fork)
# or must open it again in each process (reopen-after-fork).
# TEST_WRAPPER: a shell script every test of the backend runs under (`sh script
# test args...`): one that starts the server the tests need and exports what
# the URL's placeholders read (%P: $BW_TEST_PORT), stopping it when the test ends.
# FAULT_URL and FAULT_DEADLINE: a network store's fault tests
# (tests/integration/test_store_faults.c, integration_faults_<scheme>) run on
# FAULT_URL, which has %P and %n and gives every store call the deadline
# FAULT_DEADLINE (milliseconds); they need a TEST_WRAPPER that also exports
# $BW_TEST_SERVER_PID (the server, to stop or kill) and $BW_TEST_RESTART (a
# script that starts it again on the same port: tests/support/with_redis.sh).
# The server must answer TCP on 127.0.0.1:$BW_TEST_PORT: the fault proxy
# forwards there, and the tests point a store at the proxy by replacing %P.
function(bw_add_backend scheme)
  cmake_parse_arguments(B "" "COMPONENT;TEST_URL;PROCS;TEST_WRAPPER;FAULT_URL;FAULT_DEADLINE" "SOURCES;INCLUDES;LIBS"
    ${ARGN})
  if(B_PROCS AND NOT (B_TEST_URL AND B_PROCS MATCHES "^(keep-across-fork|reopen-after-fork)$"))
    message(FATAL_ERROR "bw_add_backend(${scheme}): PROCS needs a TEST_URL and is keep-across-fork or reopen-after-fork")
  endif()
  if(B_FAULT_URL AND NOT (B_TEST_URL AND B_TEST_WRAPPER AND B_FAULT_DEADLINE MATCHES "^[1-9][0-9]*$"))
    message(FATAL_ERROR "bw_add_backend(${scheme}): FAULT_URL needs a TEST_URL, a TEST_WRAPPER and a FAULT_DEADLINE in ms")
  endif()
  set_property(GLOBAL APPEND PROPERTY BW_BACKENDS ${scheme})
  list(TRANSFORM B_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  set_property(GLOBAL APPEND PROPERTY BW_BACKEND_SOURCES ${B_SOURCES})
  set_property(GLOBAL APPEND PROPERTY BW_BACKEND_INCLUDES ${B_INCLUDES})
  set_property(GLOBAL APPEND PROPERTY BW_BACKEND_LIBS ${B_LIBS})
  # A backend with a COMPONENT bit is a component named after its folder (another scheme of the same folder,
  # registered after it, belongs to it too); one without is in the core.
  get_filename_component(folder ${CMAKE_CURRENT_SOURCE_DIR} NAME)
  get_property(known GLOBAL PROPERTY BW_COMP_BIT_${folder} SET)
  if(B_COMPONENT)
    bw_add_component(${folder} BIT ${B_COMPONENT} SOURCES ${B_SOURCES} INCLUDES ${B_INCLUDES} LIBS ${B_LIBS})
    set_property(GLOBAL PROPERTY BW_BACKEND_COMPONENT_${scheme} ${folder})
  elseif(known)
    set_property(GLOBAL PROPERTY BW_BACKEND_COMPONENT_${scheme} ${folder})
  else()
    set_property(GLOBAL APPEND PROPERTY BW_CORE_BACKEND_SOURCES ${B_SOURCES})
  endif()
  if(B_TEST_URL)
    set_property(GLOBAL APPEND PROPERTY BW_TEST_BACKENDS ${scheme})
    set_property(GLOBAL PROPERTY BW_TEST_URL_${scheme} "${B_TEST_URL}")
    set_property(GLOBAL PROPERTY BW_TEST_PROCS_${scheme} "${B_PROCS}")
    set_property(GLOBAL PROPERTY BW_TEST_WRAPPER_${scheme} "${B_TEST_WRAPPER}")
    set_property(GLOBAL PROPERTY BW_TEST_FAULT_URL_${scheme} "${B_FAULT_URL}")
    set_property(GLOBAL PROPERTY BW_TEST_FAULT_DEADLINE_${scheme} "${B_FAULT_DEADLINE}")
  endif()
  set(BW_HAVE_${scheme} ON CACHE INTERNAL "")
endfunction()

# bw_absent_backend(scheme why): in the tree but not in this build; bw_store_open says `why`.
function(bw_absent_backend scheme why)
  set_property(GLOBAL APPEND PROPERTY BW_ABSENT_BACKENDS ${scheme})
  set_property(GLOBAL PROPERTY BW_ABSENT_WHY_${scheme} "${why}")
  set(BW_HAVE_${scheme} OFF CACHE INTERNAL "")
endfunction()

file(GLOB bw_backend_dirs LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/src/store/*)
foreach(dir ${bw_backend_dirs})
  if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/CMakeLists.txt)
    add_subdirectory(${dir})
  endif()
endforeach()

get_property(BW_BACKENDS GLOBAL PROPERTY BW_BACKENDS)
get_property(BW_ABSENT_BACKENDS GLOBAL PROPERTY BW_ABSENT_BACKENDS)
get_property(BW_BACKEND_SOURCES GLOBAL PROPERTY BW_BACKEND_SOURCES)
get_property(BW_BACKEND_INCLUDES GLOBAL PROPERTY BW_BACKEND_INCLUDES)
get_property(BW_BACKEND_LIBS GLOBAL PROPERTY BW_BACKEND_LIBS)
get_property(BW_COMPONENT_BITS GLOBAL PROPERTY BW_COMPONENT_BITS)
get_property(BW_CORE_BACKEND_SOURCES GLOBAL PROPERTY BW_CORE_BACKEND_SOURCES)

# What the tests run on: BW_TEST_BACKENDS (schemes with a TEST_URL), BW_TEST_URLS
# (their URLs, in the same order), BW_TEST_URL_<scheme>, BW_TEST_PROCS_<scheme>,
# BW_TEST_FAULT_URL_<scheme> and BW_TEST_FAULT_DEADLINE_<scheme> (empty: no fault
# tests) and BW_TEST_RUN_<scheme> (what a test command starts with: "sh wrapper"
# or nothing).
get_property(BW_TEST_BACKENDS GLOBAL PROPERTY BW_TEST_BACKENDS)
set(BW_TEST_URLS "")
foreach(b ${BW_TEST_BACKENDS})
  get_property(BW_TEST_URL_${b} GLOBAL PROPERTY BW_TEST_URL_${b})
  get_property(BW_TEST_PROCS_${b} GLOBAL PROPERTY BW_TEST_PROCS_${b})
  get_property(BW_TEST_FAULT_URL_${b} GLOBAL PROPERTY BW_TEST_FAULT_URL_${b})
  get_property(BW_TEST_FAULT_DEADLINE_${b} GLOBAL PROPERTY BW_TEST_FAULT_DEADLINE_${b})
  get_property(wrapper GLOBAL PROPERTY BW_TEST_WRAPPER_${b})
  set(BW_TEST_RUN_${b} "")
  if(wrapper)
    set(BW_TEST_RUN_${b} sh ${wrapper})
  endif()
  list(APPEND BW_TEST_URLS "${BW_TEST_URL_${b}}")
endforeach()

# Two scheme tables. backends.c, for a library with every backend compiled in (the tests' breakwater_internal, the
# command): each scheme's descriptor. backends_split.c, for the core as it ships: the core's own backends'
# descriptors, and for a component's scheme an entry naming the component, whose library has the descriptor
# (base/component.h); with the component table (bw_finish_components, below, once the integrations are known).
set(decls "")
set(entries "")
set(split_decls "")
set(split_entries "")
foreach(b ${BW_BACKENDS})
  string(APPEND decls "extern const bw__backend bw__backend_${b};\n")
  string(APPEND entries "    &bw__backend_${b},\n")
  get_property(comp GLOBAL PROPERTY BW_BACKEND_COMPONENT_${b})
  if(comp)
    string(APPEND split_decls "static const bw__backend in_${b} = {\"${b}\", {NULL}, 0, NULL, NULL, \"${comp}\"};\n")
    string(APPEND split_entries "    &in_${b},\n")
  else()
    string(APPEND split_decls "extern const bw__backend bw__backend_${b};\n")
    string(APPEND split_entries "    &bw__backend_${b},\n")
  endif()
endforeach()
foreach(b ${BW_ABSENT_BACKENDS})
  get_property(why GLOBAL PROPERTY BW_ABSENT_WHY_${b})
  set(absent "static const bw__backend absent_${b} = {\"${b}\", {NULL}, 0, NULL, \"${why}\", NULL};\n")
  string(APPEND decls "${absent}")
  string(APPEND split_decls "${absent}")
  string(APPEND entries "    &absent_${b},\n")
  string(APPEND split_entries "    &absent_${b},\n")
endforeach()
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/backends.c CONTENT
"/* backends.c — the scheme table of a build with every component compiled in, generated by cmake/backends.cmake:
 * do not edit. */
#include \"base/component.h\"
#include \"store/backend.h\"

${decls}
const bw__backend *const bw__backends[] = {
${entries}    NULL,
};

/* No component libraries: every component of this build is compiled in (BW__COMPONENTS). */
const bw__component_ref bw__component_refs[] = {{NULL, 0, NULL, NULL, 0, NULL}};
" @ONLY)
set(BW_SPLIT_TABLE_DECLS "${split_decls}")
set(BW_SPLIT_TABLE_ENTRIES "${split_entries}")

# bw_finish_components(): generate what the component libraries need, once every component is registered: the
# core's table (backends_split.c) with the component table, and each component's descriptor
# (component_<name>.c). Sets BW_COMPONENTS and BW_COMPONENT_BITS.
macro(bw_finish_components)
  get_property(BW_COMPONENTS GLOBAL PROPERTY BW_COMPONENTS)
  get_property(BW_COMPONENT_BITS GLOBAL PROPERTY BW_COMPONENT_BITS)
  set(refs "")
  set(weak "")
  foreach(c ${BW_COMPONENTS})
    string(REPLACE "-" "_" sym "bw__component_${c}")
    get_property(bit GLOBAL PROPERTY BW_COMP_BIT_${c})
    string(APPEND weak "extern const bw__component ${sym} __attribute__((weak));\n")
    set(items "NULL")
    set(item_decls "")
    foreach(b ${BW_BACKENDS})
      get_property(bc GLOBAL PROPERTY BW_BACKEND_COMPONENT_${b})
      if(bc STREQUAL c)
        string(APPEND item_decls "extern const bw__backend bw__backend_${b};\n")
        string(APPEND item_list "&bw__backend_${b}, ")
        set(items "backends")
      endif()
    endforeach()
    set(is_store 0)
    if(items STREQUAL "backends")
      set(is_store 1)
    endif()
    string(APPEND refs
      "    {\"${c}\", ${bit}, \"libbreakwater-${c}.so.${PROJECT_VERSION_MAJOR}\", \"${sym}\", ${is_store}, LINKED(${sym})},\n")
    set(item_array "")
    if(items STREQUAL "backends")
      set(item_array "static const void *const backends[] = {${item_list}NULL};\n")
      set(include_backend "#include \"store/backend.h\"\n")
    else()
      set(include_backend "")
    endif()
    set(item_list "")
    file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/component_${c}.c CONTENT
"/* component_${c}.c — the descriptor of the ${c} component's library (base/component.h), generated by
 * cmake/backends.cmake: do not edit. */
#include \"base/component.h\"
#include \"breakwater/common.h\"
${include_backend}
${item_decls}${item_array}
__attribute__((visibility(\"default\"))) const bw__component ${sym} = {BW__COMPONENT_ABI, ${bit}, ${items}};
" @ONLY)
  endforeach()
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/backends_split.c CONTENT
"/* backends_split.c — the scheme table of the core as it ships, its components in libraries of their own
 * (base/component.h), generated by cmake/backends.cmake: do not edit. */
#include \"base/component.h\"
#include \"store/backend.h\"

${BW_SPLIT_TABLE_DECLS}
const bw__backend *const bw__backends[] = {
${BW_SPLIT_TABLE_ENTRIES}    NULL,
};

/* A static core finds a component linked into the program through a weak reference; a shared one loads it. */
#ifdef BW__STATIC
${weak}#define LINKED(sym) &sym
#else
#define LINKED(sym) NULL
#endif

const bw__component_ref bw__component_refs[] = {
${refs}    {NULL, 0, NULL, NULL, 0, NULL},
};
" @ONLY)
endmacro()

list(APPEND BW_BACKEND_SOURCES ${PROJECT_BINARY_DIR}/generated/backends.c)
message(STATUS "breakwater store backends: ${BW_BACKENDS} (absent: ${BW_ABSENT_BACKENDS})")
