/* exactref/export.h: the ER_API export macro. Every public function carries it; everything else is hidden. */
#ifndef EXACTREF_EXPORT_H
#define EXACTREF_EXPORT_H

#if defined(_WIN32)
#  if defined(ER_BUILDING_LIBRARY)
#    define ER_API __declspec(dllexport)
#  else
#    define ER_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define ER_API __attribute__((visibility("default")))
#else
#  define ER_API
#endif

#endif
