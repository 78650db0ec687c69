# The source revision every binary reports (QGATE_COMMIT, in qgated --version, /metrics, the worker's
# run context and the reference build's identity). It is read at every build, not when the build
# folder is configured, so that a build after a commit names that commit; the header is rewritten
# only when the revision changed, so only the few sources that include it compile again.
set(QGATE_REVISION_DIR ${CMAKE_BINARY_DIR}/generated/revision)
set(QGATE_REVISION_HEADER ${QGATE_REVISION_DIR}/qgate_revision.h)
add_custom_target(qgate_revision_header
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${QGATE_REVISION_HEADER}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteRevision.cmake
  BYPRODUCTS ${QGATE_REVISION_HEADER}
  VERBATIM)
# Link this to include "qgate_revision.h"; the header is written before the target's sources compile.
add_library(qgate_revision INTERFACE)
target_include_directories(qgate_revision INTERFACE ${QGATE_REVISION_DIR})
add_dependencies(qgate_revision qgate_revision_header)
