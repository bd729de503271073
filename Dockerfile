RUN echo
