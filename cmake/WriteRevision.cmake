# Run at every build (cmake -P, cmake/QgateRevision.cmake): writes OUTPUT, the header that defines
# QGATE_COMMIT as SOURCE_DIR's git revision ("unknown" outside a git checkout), unless it already
# says that, so that its includers compile again only after the revision changed.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR NOT commit)
  set(commit "unknown")
endif()
set(text "// The source revision this build is of; written at build time by cmake/WriteRevision.cmake.\n#pragma once\n#define QGATE_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
